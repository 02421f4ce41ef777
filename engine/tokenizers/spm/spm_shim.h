// A C interface to the SentencePiece library, built into its own shared library (hh_spm) and
// loaded into a separate link namespace (sentencepiece_library.h). Why: Debian's
// libsentencepiece.so.0 carries its own copy of protobuf and exports it, while LibTorch loads
// Debian's libprotobuf.so.32; in one namespace the two bind to each other's symbols and the
// process crashes at start-up. Across this interface only plain data passes: the caller owns
// every buffer, nothing allocated on one side is freed on the other, and no exception crosses.
// Sizes: each call that fills a buffer returns the size it needs; call again with a larger one.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hh_spm hh_spm;

// A model from the bytes of a .model file; NULL on failure with the reason in `error`.
hh_spm* hh_spm_load(const char* bytes, size_t size, char* error, size_t error_capacity);
void hh_spm_free(hh_spm* model);
int hh_spm_piece_size(const hh_spm* model);
// 0 unk, 1 bos, 2 eos, 3 pad: the model's id for the role, or -1.
int hh_spm_role(const hh_spm* model, int role);
// The piece of `id` into `out`; returns its length in bytes (0 for an id outside the model).
size_t hh_spm_id_to_piece(const hh_spm* model, int id, char* out, size_t capacity);
// The id of a piece (the unknown id for one the model does not have).
int hh_spm_piece_to_id(const hh_spm* model, const char* piece, size_t size);
// Encodes UTF-8 text: 0 and the id count in *count (ids written up to capacity), or -1 and the
// reason in `error`.
int hh_spm_encode(const hh_spm* model, const char* text, size_t size, int* ids, size_t capacity, size_t* count,
                  char* error, size_t error_capacity);
// Decodes ids: 0 and the text's length in *length (bytes written up to capacity), or -1.
int hh_spm_decode(const hh_spm* model, const int* ids, size_t count, char* out, size_t capacity, size_t* length);

#ifdef __cplusplus
}
#endif

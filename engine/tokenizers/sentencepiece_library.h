// The SentencePiece library, loaded once per process into a link namespace of its own
// (dlmopen(LM_ID_NEWLM)) through the shim of spm/spm_shim.h, and a model handle on it. The shim
// is found at HH_SPM_SHIM (environment) or where the build put it (compile definition
// HH_SPM_SHIM_PATH). A separate namespace rather than dlopen(RTLD_DEEPBIND), which would do for
// the protobuf clash too: AddressSanitizer refuses RTLD_DEEPBIND, and the sanitizer builds run
// these tokenizers as well.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct hh_spm;

namespace hh::tok {

class SentencePieceHandle {
 public:
  // A model from a .model file's bytes; throws std::runtime_error with the library's reason (or
  // why the library could not be loaded); the caller names the file.
  static std::unique_ptr<SentencePieceHandle> load(const std::string& bytes);
  ~SentencePieceHandle();
  SentencePieceHandle(const SentencePieceHandle&) = delete;
  SentencePieceHandle& operator=(const SentencePieceHandle&) = delete;

  int pieceSize() const;
  enum class Role { Unk = 0, Bos = 1, Eos = 2, Pad = 3 };
  int roleId(Role role) const;  // -1 when the model has none
  std::string idToPiece(int id) const;
  int pieceToId(std::string_view piece) const;  // the unknown id for a piece it does not have
  std::vector<int> encode(std::string_view text) const;  // throws std::runtime_error
  std::string decode(const std::vector<int>& ids) const;

 private:
  explicit SentencePieceHandle(hh_spm* model) : model_(model) {}
  hh_spm* model_;
};

}  // namespace hh::tok

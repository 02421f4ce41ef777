// The SentencePiece library behind the C interface of spm_shim.h.
#include "engine/tokenizers/spm/spm_shim.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

struct hh_spm {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {
void copyOut(const std::string& text, char* out, size_t capacity) {
  if (out == nullptr || capacity == 0) return;
  const size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}
}  // namespace

extern "C" {

hh_spm* hh_spm_load(const char* bytes, size_t size, char* error, size_t error_capacity) {
  try {
    auto* model = new hh_spm;
    const auto status = model->processor.LoadFromSerializedProto(std::string(bytes, size));
    if (status.ok()) return model;
    copyOut(status.ToString(), error, error_capacity);
    delete model;
  } catch (const std::exception& e) {
    copyOut(e.what(), error, error_capacity);
  } catch (...) {
    copyOut("unknown error", error, error_capacity);
  }
  return nullptr;
}

void hh_spm_free(hh_spm* model) { delete model; }

int hh_spm_piece_size(const hh_spm* model) { return model->processor.GetPieceSize(); }

int hh_spm_role(const hh_spm* model, int role) {
  switch (role) {
    case 0: return model->processor.unk_id();
    case 1: return model->processor.bos_id();
    case 2: return model->processor.eos_id();
    case 3: return model->processor.pad_id();
    default: return -1;
  }
}

size_t hh_spm_id_to_piece(const hh_spm* model, int id, char* out, size_t capacity) {
  if (id < 0 || id >= model->processor.GetPieceSize()) return 0;
  try {
    const std::string& piece = model->processor.IdToPiece(id);
    if (out != nullptr && capacity >= piece.size()) std::memcpy(out, piece.data(), piece.size());
    return piece.size();
  } catch (...) {
    return 0;
  }
}

int hh_spm_piece_to_id(const hh_spm* model, const char* piece, size_t size) {
  try {
    return model->processor.PieceToId(std::string(piece, size));
  } catch (...) {
    return -1;
  }
}

int hh_spm_encode(const hh_spm* model, const char* text, size_t size, int* ids, size_t capacity, size_t* count,
                  char* error, size_t error_capacity) {
  try {
    std::vector<int> out;
    const auto status = model->processor.Encode(std::string(text, size), &out);
    if (!status.ok()) {
      copyOut(status.ToString(), error, error_capacity);
      return -1;
    }
    *count = out.size();
    std::copy_n(out.begin(), std::min(out.size(), capacity), ids);
    return 0;
  } catch (const std::exception& e) {
    copyOut(e.what(), error, error_capacity);
  } catch (...) {
    copyOut("unknown error", error, error_capacity);
  }
  return -1;
}

int hh_spm_decode(const hh_spm* model, const int* ids, size_t count, char* out, size_t capacity, size_t* length) {
  try {
    std::string text;
    if (!model->processor.Decode(std::vector<int>(ids, ids + count), &text).ok()) return -1;
    *length = text.size();
    if (out != nullptr) std::memcpy(out, text.data(), std::min(text.size(), capacity));
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"

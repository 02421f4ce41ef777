// Loading the SentencePiece shim into its own link namespace; see sentencepiece_library.h.
#include "engine/tokenizers/sentencepiece_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "engine/tokenizers/spm/spm_shim.h"

namespace hh::tok {
namespace {

// The shim's functions, resolved once.
struct Shim {
  decltype(&hh_spm_load) load = nullptr;
  decltype(&hh_spm_free) free = nullptr;
  decltype(&hh_spm_piece_size) pieceSize = nullptr;
  decltype(&hh_spm_role) role = nullptr;
  decltype(&hh_spm_id_to_piece) idToPiece = nullptr;
  decltype(&hh_spm_piece_to_id) pieceToId = nullptr;
  decltype(&hh_spm_encode) encode = nullptr;
  decltype(&hh_spm_decode) decode = nullptr;
  std::string error;  // why it could not be loaded
};

std::string shimPath() {
  if (const char* path = std::getenv("HH_SPM_SHIM"); path != nullptr && *path != '\0') return path;
#ifdef HH_SPM_SHIM_PATH
  return HH_SPM_SHIM_PATH;
#else
  return "libhh_spm.so";
#endif
}

template <typename F>
void resolve(void* library, const char* name, F& out, std::string& error) {
  out = reinterpret_cast<F>(::dlsym(library, name));
  if (out == nullptr && error.empty()) error = std::string("no symbol ") + name;
}

const Shim& shim() {
  static Shim s;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string path = shimPath();
    void* library = ::dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = ::dlerror();
      s.error = "cannot load the SentencePiece library (" + path + "): " + (why ? why : "unknown error");
      return;
    }
    resolve(library, "hh_spm_load", s.load, s.error);
    resolve(library, "hh_spm_free", s.free, s.error);
    resolve(library, "hh_spm_piece_size", s.pieceSize, s.error);
    resolve(library, "hh_spm_role", s.role, s.error);
    resolve(library, "hh_spm_id_to_piece", s.idToPiece, s.error);
    resolve(library, "hh_spm_piece_to_id", s.pieceToId, s.error);
    resolve(library, "hh_spm_encode", s.encode, s.error);
    resolve(library, "hh_spm_decode", s.decode, s.error);
    if (!s.error.empty()) s.error = path + ": " + s.error;
  });
  if (!s.error.empty()) throw std::runtime_error(s.error);
  return s;
}

}  // namespace

std::unique_ptr<SentencePieceHandle> SentencePieceHandle::load(const std::string& bytes) {
  const auto& s = shim();
  char error[512] = {0};
  hh_spm* model = s.load(bytes.data(), bytes.size(), error, sizeof error);
  if (model == nullptr) throw std::runtime_error(error[0] ? error : "not a SentencePiece model");
  return std::unique_ptr<SentencePieceHandle>(new SentencePieceHandle(model));
}

SentencePieceHandle::~SentencePieceHandle() { shim().free(model_); }

int SentencePieceHandle::pieceSize() const { return shim().pieceSize(model_); }
int SentencePieceHandle::roleId(Role role) const { return shim().role(model_, static_cast<int>(role)); }

std::string SentencePieceHandle::idToPiece(int id) const {
  std::string piece(32, '\0');
  size_t n = shim().idToPiece(model_, id, piece.data(), piece.size());
  if (n > piece.size()) {
    piece.resize(n);
    n = shim().idToPiece(model_, id, piece.data(), piece.size());
  }
  piece.resize(n);
  return piece;
}

int SentencePieceHandle::pieceToId(std::string_view piece) const {
  return shim().pieceToId(model_, piece.data(), piece.size());
}

std::vector<int> SentencePieceHandle::encode(std::string_view text) const {
  std::vector<int> ids(text.size() + 8);  // byte fallback gives at most one id per byte, plus the dummy prefix
  size_t count = 0;
  char error[512] = {0};
  if (shim().encode(model_, text.data(), text.size(), ids.data(), ids.size(), &count, error, sizeof error) != 0)
    throw std::runtime_error(std::string("SentencePiece could not encode the text: ") + error);
  if (count > ids.size()) {  // not expected; kept correct anyway
    ids.resize(count);
    shim().encode(model_, text.data(), text.size(), ids.data(), ids.size(), &count, error, sizeof error);
  }
  ids.resize(count);
  return ids;
}

std::string SentencePieceHandle::decode(const std::vector<int>& ids) const {
  std::string text(ids.size() * 8 + 16, '\0');
  size_t length = 0;
  if (shim().decode(model_, ids.data(), ids.size(), text.data(), text.size(), &length) != 0) return {};
  if (length > text.size()) {
    text.resize(length);
    shim().decode(model_, ids.data(), ids.size(), text.data(), text.size(), &length);
  }
  text.resize(length);
  return text;
}

}  // namespace hh::tok

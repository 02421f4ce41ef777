// SentencePiece models through the SentencePiece library; see sentencepiece_model.h.
#include "engine/tokenizers/sentencepiece_model.h"

#include <sys/stat.h>

#include <vector>

#include "engine/io/safetensors.h"
#include "engine/tokenizers/sentencepiece_library.h"
#include "engine/tokenizers/tokenizer_files.h"

namespace hh::tok {
namespace {

class SentencePieceModelTokenizer : public Tokenizer {
 public:
  SentencePieceModelTokenizer(const std::string& serialized, const std::string& path) {
    try {
      model_ = SentencePieceHandle::load(serialized);
    } catch (const std::runtime_error& e) {
      throw io::FormatError(path + ": not a usable SentencePiece model (" + e.what() + ")");
    }
    const int n = model_->pieceSize();
    if (n <= 0) throw io::FormatError(path + ": the SentencePiece model has no pieces");
    pieces_.reserve(size_t(n));
    for (int id = 0; id < n; ++id) pieces_.push_back(model_->idToPiece(id));
  }

  std::string kind() const override { return "sentencepiece"; }
  const SentencePieceHandle& model() const { return *model_; }

 protected:
  void encodeRun(std::string_view text, bool, std::vector<int64_t>& out) const override {
    const auto ids = model_->encode(text);
    out.insert(out.end(), ids.begin(), ids.end());
  }

  std::string decodePieces(const std::vector<Piece>& pieces) const override {
    std::string out;
    std::vector<int> run;  // consecutive model pieces, decoded together
    auto flush = [&] {
      if (run.empty()) return;
      out += model_->decode(run);
      run.clear();
    };
    for (const auto& piece : pieces) {
      if (piece.added) {
        flush();
        out += piece.token;
      } else {
        run.push_back(model_->pieceToId(piece.token));
      }
    }
    flush();
    return out;
  }

  int64_t modelTokenToId(const std::string& token) const override {
    const int id = model_->pieceToId(token);  // the unknown id for a piece it does not have
    return id >= 0 && size_t(id) < pieces_.size() && pieces_[size_t(id)] == token ? id : -1;
  }
  const std::string* modelIdToToken(int64_t id) const override {
    return id >= 0 && size_t(id) < pieces_.size() ? &pieces_[size_t(id)] : nullptr;
  }
  int64_t modelVocabSize() const override { return int64_t(pieces_.size()); }

 private:
  std::unique_ptr<SentencePieceHandle> model_;
  std::vector<std::string> pieces_;  // id -> piece
};

// The model's own role ids where the config files named none.
void fillRolesFromModel(Tokenizer& tok, const SentencePieceHandle& model) {
  using Role = SentencePieceHandle::Role;
  SpecialTokenIds ids = tok.specialTokens();
  auto fill = [&](int64_t& role, int id) {
    if (role < 0 && id >= 0 && id < model.pieceSize()) role = id;
  };
  fill(ids.unk, model.roleId(Role::Unk));
  fill(ids.bos, model.roleId(Role::Bos));
  fill(ids.eos, model.roleId(Role::Eos));
  fill(ids.pad, model.roleId(Role::Pad));
  tok.setSpecialTokens(ids);
  // The roles are matched as units in text, as LlamaTokenizer does with its special tokens.
  std::vector<AddedToken> added = tok.addedTokens();
  for (const int64_t id : {ids.unk, ids.bos, ids.eos, ids.pad}) {
    if (id < 0) continue;
    const std::string piece = model.idToPiece(int(id));
    bool known = false;
    for (const auto& t : added) known = known || t.id == id;
    if (!known && !piece.empty()) added.push_back({piece, id, true, false, false, false});
  }
  tok.setAddedTokens(std::move(added));
}

}  // namespace

std::unique_ptr<Tokenizer> loadSentencePieceModel(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > kMaxModelBytes)
    throw io::FormatError(path + ": " + std::to_string(st.st_size) + " bytes is larger than any SentencePiece model (" +
                          std::to_string(kMaxModelBytes >> 20) + " MB at most)");
  auto tok = std::make_unique<SentencePieceModelTokenizer>(files::readText(path), path);
  const std::string dir = files::directoryOf(path);
  files::applyConfig(*tok, dir, "", /*addConfigTokens=*/true);
  fillRolesFromModel(*tok, tok->model());

  const std::string config = files::join(dir, "tokenizer_config.json");
  bool addBos = true, addEos = false;
  if (files::exists(config)) {
    const auto json = files::readJson(config);
    addBos = files::boolAt(json, "add_bos_token", config, true);
    addEos = files::boolAt(json, "add_eos_token", config, false);
  }
  std::vector<int64_t> prefix, suffix;
  if (addBos && tok->bosId() >= 0) prefix.push_back(tok->bosId());
  if (addEos && tok->eosId() >= 0) suffix.push_back(tok->eosId());
  tok->setPostProcessor(std::move(prefix), std::move(suffix));
  return tok;
}

}  // namespace hh::tok

#include "engine/models/preflight.h"
#include "engine/core/error_text.h"

#include <filesystem>
#include <set>
#include <cstdio>
#include <sstream>

#include <torch/types.h>

#include "engine/io/safetensors.h"
#include "engine/models/expected_weights.h"
#include "engine/config/model_config.h"
#include "engine/models/weight_source.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::models {
namespace {

using Severity = PreflightFinding::Severity;

// The body prefix the file uses ("transformer." or none, say), found by the first body tensor;
// false when neither form is there.
bool findBodyPrefix(const std::vector<WeightSpec>& specs, const std::string& prefix, WeightSource& source,
                    std::string& used) {
  const std::string anchor = specs.front().name.substr(prefix.size());
  for (const std::string& p : {prefix, std::string()}) {
    if (source.contains(p + anchor)) {
      used = p;
      return true;
    }
  }
  return false;
}

// Every tensor the config implies: present, of its shape, floating point. The first five missing
// and the first five of another shape are listed, then counted. Returns the names it found.
std::set<std::string> checkExpectedTensors(const std::vector<WeightSpec>& specs, const std::string& prefix,
                                           const std::string& bodyPrefixUsed, WeightSource& source,
                                           PreflightReport& r) {
  std::set<std::string> used;
  int missing = 0, mismatched = 0;
  const auto blocker = [&](const std::string& text) { r.findings.push_back({Severity::Blocker, text}); };
  for (const auto& spec : specs) {
    auto name = spec.bodyPrefixOptional ? bodyPrefixUsed + spec.name.substr(prefix.size()) : spec.name;
    if (!source.contains(name) && !spec.alternative.empty() && source.contains(spec.alternative))
      name = spec.alternative;
    if (!source.contains(name)) {
      if (++missing <= 5) blocker(source.path() + ": missing tensor \"" + name + "\"");
      continue;
    }
    used.insert(name);
    const auto& info = source.info(name);
    if (info.shape != spec.shape) {
      if (++mismatched <= 5)
        blocker(source.path() + ": tensor \"" + name + "\" has shape " + shapeString(info.shape) +
                ", config.json implies " + shapeString(spec.shape) + " (" + spec.what + ")");
    } else if (info.dtype != "F32" && info.dtype != "F16" && info.dtype != "BF16" && info.dtype != "F64") {
      blocker(source.path() + ": tensor \"" + name + "\" has dtype " + info.dtype + "; weights must be floating point");
    }
    if (spec.name == specs.front().name) r.embeddingRows = info.shape.empty() ? 0 : info.shape[0];
  }
  if (missing > 5) blocker(std::to_string(missing - 5) + " more tensors are missing");
  if (mismatched > 5) blocker(std::to_string(mismatched - 5) + " more shapes differ");
  r.weightsOk = missing == 0 && mismatched == 0;
  return used;
}

// The adapters a converted folder's attention plan needs: present and of their shape, as loading
// reads them.
void checkAdapterTensors(const ModelConfig& config, WeightSource& source, PreflightReport& r) {
  std::vector<WeightSpec> specs;
  try {
    specs = expectedAdapterWeights(config);
  } catch (const std::exception& e) {
    r.findings.push_back({Severity::Blocker, errorText(e)});
    return;
  }
  int missing = 0;
  for (const auto& spec : specs) {
    const bool present = source.contains(spec.name);
    if (present && source.info(spec.name).shape == spec.shape) continue;
    r.weightsOk = false;
    if (!present && ++missing > 5) continue;
    r.findings.push_back(
        {Severity::Blocker,
         source.path() + ": " +
             (present ? "tensor \"" + spec.name + "\" has shape " + shapeString(source.info(spec.name).shape) + ", " +
                            spec.what + " implies " + shapeString(spec.shape)
                      : "missing tensor \"" + spec.name + "\" (" + spec.what + ")")});
  }
  if (missing > 5)
    r.findings.push_back({Severity::Blocker, std::to_string(missing - 5) + " more adapter tensors are missing"});
}

// A tied LM head with an lm_head.weight in the file: loading unties the head only when that
// tensor differs from the embedding, so the two are read and compared here too.
void checkStoredHead(const ModelConfig& config, const std::string& embedding, WeightSource& source,
                     PreflightReport& r) {
  const std::vector<int64_t> shape{config.vocabSize, config.hiddenSize};
  try {
    const auto head = source.take("lm_head.weight", shape, "vocab_size x hidden size");
    r.tiedHead = source.contains(embedding) && source.info(embedding).shape == shape &&
                 torch::equal(head, source.take(embedding, shape, "vocab_size x hidden size"));
  } catch (const std::exception& e) {
    r.findings.push_back({Severity::Blocker, errorText(e)});
    return;
  }
  r.findings.push_back(
      {Severity::Info, r.tiedHead ? "lm_head.weight is present and equals the embedding: the head stays tied"
                                  : "lm_head.weight is present although tie_word_embeddings is true: it is used"});
}

void checkWeights(const ModelConfig& config, WeightSource& source, PreflightReport& r) {
  const auto specs = expectedWeights(config);
  const auto prefix = bodyPrefix(config.architecture);
  std::string bodyPrefixUsed;
  if (!findBodyPrefix(specs, prefix, source, bodyPrefixUsed)) {
    r.findings.push_back({Severity::Blocker, source.path() + ": missing tensor \"" + specs.front().name +
                                                 "\" — is this checkpoint of the architecture its config.json names?"});
    return;
  }
  auto used = checkExpectedTensors(specs, prefix, bodyPrefixUsed, source, r);
  if (config.plan.anyLinear()) checkAdapterTensors(config, source, r);
  // A "tied" LM's file may hold an lm_head too (a classifier has none).
  const bool lmHead = config.head == HeadKind::CausalLM;
  if (lmHead && config.tieWordEmbeddings && source.contains("lm_head.weight")) {
    used.insert("lm_head.weight");
    checkStoredHead(config, bodyPrefixUsed + specs.front().name.substr(prefix.size()), source, r);
  }
  for (const auto& name : source.names()) {
    r.weightBytes += source.info(name).size;
    if (!used.count(name) && !isIgnoredBuffer(name) && name.rfind("hedgehog.", 0) != 0) r.unusedTensors.push_back(name);
  }
  if (!r.unusedTensors.empty())
    r.findings.push_back({Severity::Warning, std::to_string(r.unusedTensors.size()) +
                                                 " tensors in the file are not used (first: \"" +
                                                 r.unusedTensors.front() + "\")"});
}

}  // namespace

bool PreflightReport::ready() const {
  for (const auto& f : findings)
    if (f.severity == Severity::Blocker) return false;
  return configOk && weightsOk;
}

namespace {

// The config's shape into the report, with what it means for the conversion.
void describeConfig(const ModelConfig& config, PreflightReport& r) {
  r.architecture = toString(config.architecture);
  r.modelType = config.modelType;
  r.head = toString(config.head);
  r.positional = toString(config.positions);
  r.activation = config.activation;
  r.causal = config.causal;
  r.tiedHead = config.tieWordEmbeddings;
  r.layers = config.layers;
  r.heads = config.heads;
  r.kvHeads = config.kvHeads;
  r.headDim = config.headDim;
  r.hiddenSize = config.hiddenSize;
  r.intermediateSize = config.intermediateSize;
  r.maxPositions = config.maxPositions;
  r.configVocab = config.vocabSize;
  r.normEps = config.normEps;
  r.ropeTheta = config.positions == PositionalScheme::Rotary ? config.ropeTheta : 0.0;
  r.parameters = expectedParameterCount(config);
  r.convertedLayers = config.plan.linearLayerCount();
  if (config.headDim % 8 != 0)
    r.findings.push_back({Severity::Warning, "head_dim " + std::to_string(config.headDim) +
                                                 " is not a multiple of 8: the fused CPU kernel is not used"});
  if (!config.causal)
    r.findings.push_back({Severity::Info, "bidirectional attention: only the additive rule applies; no recurrent generation"});
}

// The weights file: its dtype, tensors and shards, and (with a config) every tensor's shape.
void checkWeightsFile(const std::string& folder, const ModelConfig* config, PreflightReport& r) {
  try {
    auto source = WeightSource::open(folder);
    r.weightsFile = source.path();
    r.dtype = source.dominantDtype();
    r.tensorsInFile = static_cast<int64_t>(source.names().size());
    r.shards = static_cast<int64_t>(io::ShardedSafetensors::open(source.path()).shardCount());
    if (config) checkWeights(*config, source, r);
    if (r.dtype == "F16" || r.dtype == "BF16")
      r.findings.push_back({Severity::Info, r.dtype + " weights are converted on load to the precision the job computes "
                                                      "in (float32 unless its dtype says otherwise)"});
  } catch (const std::exception& e) {
    r.findings.push_back({Severity::Blocker, errorText(e)});
  }
}

// The tokenizer, and whether its ids fit the embedding.
void checkTokenizer(const std::string& folder, PreflightReport& r) {
  try {
    auto tokenizer = tok::loadTokenizer(folder);
    r.tokenizerOk = true;
    r.tokenizerKind = tokenizer->kind();
    r.tokenizerVocab = tokenizer->vocabSize();
  } catch (const std::exception& e) {
    r.findings.push_back({Severity::Warning,
                          "no usable tokenizer: " + errorText(e) + " (text data cannot be tokenized for this model)"});
  }
  if (!r.tokenizerOk || !r.configOk) return;
  const int64_t rows = r.embeddingRows > 0 ? r.embeddingRows : r.configVocab;
  if (r.tokenizerVocab > rows)
    r.findings.push_back({Severity::Blocker, "the tokenizer has " + std::to_string(r.tokenizerVocab) +
                                                 " tokens but the embedding has " + std::to_string(rows) +
                                                 " rows: some token ids would be out of range"});
  else if (r.tokenizerVocab < rows)
    r.findings.push_back({Severity::Info, "embedding has " + std::to_string(rows - r.tokenizerVocab) +
                                              " more rows than the tokenizer has tokens (padding rows; fine)"});
}

}  // namespace

PreflightReport preflight(const std::string& folder) {
  PreflightReport r;
  r.folder = folder;
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    r.findings.push_back({Severity::Blocker, folder + ": not a folder"});
    return r;
  }
  ModelConfig config;
  try {
    config = loadModelConfig(folder);
    r.configOk = true;
  } catch (const std::exception& e) {
    r.findings.push_back({Severity::Blocker, errorText(e)});
  }
  if (r.configOk) describeConfig(config, r);
  checkWeightsFile(folder, r.configOk ? &config : nullptr, r);
  checkTokenizer(folder, r);
  return r;
}

std::string humanCount(int64_t n) {
  char buffer[32];
  if (n >= 1000000000) std::snprintf(buffer, sizeof buffer, "%.2f B", double(n) / 1e9);
  else if (n >= 1000000) std::snprintf(buffer, sizeof buffer, "%.1f M", double(n) / 1e6);
  else if (n >= 1000) std::snprintf(buffer, sizeof buffer, "%.1f K", double(n) / 1e3);
  else std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(n));
  return buffer;
}

namespace {

// 1.0 MiB, 253 KiB, 980 B: a file's size as people read it.
std::string humanBytes(int64_t bytes) {
  char buffer[32];
  if (bytes >= (int64_t(1) << 30)) std::snprintf(buffer, sizeof buffer, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (1 << 20)) std::snprintf(buffer, sizeof buffer, "%.1f MiB", double(bytes) / double(1 << 20));
  else if (bytes >= (1 << 10)) std::snprintf(buffer, sizeof buffer, "%lld KiB", static_cast<long long>(bytes >> 10));
  else std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  return buffer;
}

// 10000, 500000, 0.5: RoPE's base without trailing zeros.
std::string shortNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.10g", value);
  return buffer;
}

}  // namespace

std::string PreflightReport::text() const {
  std::ostringstream s;
  auto row = [&](const char* key, const std::string& value) { s << "  " << key << std::string(22 - std::string(key).size(), ' ') << value << "\n"; };
  auto num = [](int64_t v) { return std::to_string(v); };
  s << "pre-flight: " << folder << "\n";
  if (configOk) {
    row("architecture", architecture + " (model_type \"" + modelType + "\", " + head + " head)");
    row("parameters", humanCount(parameters) + " (" + num(parameters) + ")");
    row("layers", num(layers));
    row("heads", num(heads) + " query, " + num(kvHeads) + " key/value" + (kvHeads != heads ? " (grouped-query)" : ""));
    row("head dim", num(headDim));
    row("hidden / MLP", num(hiddenSize) + " / " + num(intermediateSize) + " (" + activation + ")");
    row("positions", positional + ", up to " + num(maxPositions) + (ropeTheta > 0 ? ", theta " + shortNumber(ropeTheta) : ""));
    row("attention", std::string(causal ? "causal" : "bidirectional") +
                         (convertedLayers > 0 ? ", " + num(convertedLayers) + " layers already linear" : ", all softmax"));
    row("tied head", tiedHead ? "yes" : "no");
    row("vocab (config)", num(configVocab));
  }
  if (!weightsFile.empty()) {
    row("weights", weightsFile + " (" + num(shards) + (shards == 1 ? " file, " : " shards, ") + num(tensorsInFile) +
                       " tensors, " + humanBytes(static_cast<int64_t>(weightBytes)) + ")");
    row("dtype", dtype);
    if (embeddingRows > 0) row("embedding rows", num(embeddingRows));
  }
  if (tokenizerOk) row("tokenizer", tokenizerKind + ", " + num(tokenizerVocab) + " tokens");
  s << (ready() ? "ready to convert" : "NOT ready to convert") << "\n";
  for (const auto& f : findings)
    s << "  " << (f.severity == Severity::Blocker ? "blocker: " : f.severity == Severity::Warning ? "warning: " : "note:    ")
      << f.message << "\n";
  return s.str();
}

nlohmann::json PreflightReport::toJson() const {
  nlohmann::json findingsJson = nlohmann::json::array();
  for (const auto& f : findings)
    findingsJson.push_back({{"severity", f.severity == Severity::Blocker ? "blocker" : f.severity == Severity::Warning ? "warning" : "info"},
                            {"message", f.message}});
  return {{"folder", folder}, {"ready", ready()}, {"architecture", architecture}, {"model_type", modelType},
          {"head", head}, {"parameters", parameters}, {"layers", layers}, {"heads", heads}, {"kv_heads", kvHeads},
          {"head_dim", headDim}, {"hidden_size", hiddenSize}, {"intermediate_size", intermediateSize},
          {"positional", positional}, {"max_positions", maxPositions}, {"causal", causal}, {"tied_head", tiedHead},
          {"vocab_config", configVocab}, {"embedding_rows", embeddingRows}, {"tokenizer", tokenizerKind},
          {"tokenizer_vocab", tokenizerVocab}, {"dtype", dtype}, {"weights", weightsFile}, {"shards", shards},
          {"converted_layers", convertedLayers}, {"unused_tensors", unusedTensors}, {"findings", findingsJson}};
}

}  // namespace hh::models

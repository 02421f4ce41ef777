// Pre-flight check of a model folder, before any training starts: what the model is, and
// everything that would stop (blockers) or degrade (warnings) a conversion. Never throws for a
// bad folder: every problem becomes a finding that names the file.
// Reads config.json, the safetensors headers and the tokenizer files; tensor data only where
// loading decides by it (a tied LM's file that also holds lm_head.weight: the two are compared).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hh::models {

struct PreflightFinding {
  enum class Severity { Blocker, Warning, Info };
  Severity severity = Severity::Info;
  std::string message;
};

struct PreflightReport {
  std::string folder;
  bool configOk = false, weightsOk = false, tokenizerOk = false;
  // From config.json
  std::string architecture, modelType, head, positional, activation;
  bool causal = true, tiedHead = true;
  int64_t layers = 0, heads = 0, kvHeads = 0, headDim = 0, hiddenSize = 0, intermediateSize = 0, maxPositions = 0;
  int64_t configVocab = 0;
  double normEps = 0, ropeTheta = 0;
  int64_t parameters = 0;           // what the config implies
  int64_t convertedLayers = 0;      // layers already linear (a converted folder)
  // From the weights
  std::string weightsFile, dtype;
  int64_t shards = 0, tensorsInFile = 0, embeddingRows = 0;
  uint64_t weightBytes = 0;
  std::vector<std::string> unusedTensors;
  // From the tokenizer
  std::string tokenizerKind;
  int64_t tokenizerVocab = 0;

  std::vector<PreflightFinding> findings;
  bool ready() const;               // no blockers
  std::string text() const;         // the report as aligned lines
  nlohmann::json toJson() const;
};

PreflightReport preflight(const std::string& folder);
// 111968 -> "112.0 K", 124439808 -> "124.4 M".
std::string humanCount(int64_t n);

}  // namespace hh::models

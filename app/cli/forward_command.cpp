// `hedgehog forward MODEL_DIR --ids IDS.safetensors --out OUT.safetensors [--compare REF]`:
// runs a model on the I64 tensor `input_ids` [B, T] (optional `attention_mask` and
// `token_type_ids` [B, T] in the same file) and writes `logits` (F32, [B, T, V] or [B, labels])
// and `attentions` (F32, [B, L, H, T, T]: the softmax weights, or the linear weights of converted
// layers) — the layout of the fixture's reference file, so users can diff it against their own
// implementation. --compare prints the relative error of each tensor against a reference file.
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/core/runtime.h"
#include "engine/io/safetensors.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"

namespace hh::cli {
namespace {

struct ForwardArgs {
  std::string modelDir, idsPath, outPath, comparePath, device;
  bool softmaxOnly = false;
};

// max |a - b| / max |b| in fp64; NaN when either holds a NaN (a mismatch, never "within").
double relativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  if (bd.numel() == 0) return 0.0;  // nothing to differ
  if (ad.isnan().any().item<bool>() || bd.isnan().any().item<bool>()) return std::nan("");
  const double scale = bd.abs().max().item<double>();
  const double err = (ad - bd).abs().max().item<double>();
  return scale > 0 ? err / scale : err;
}

// `name` from the ids file as I64 [B, T] like `ids`, every value in [0, limit).
torch::Tensor readIdsLike(const io::SafetensorsFile& file, const std::string& path, const char* name,
                          const torch::Tensor& ids, int64_t limit) {
  const auto& info = file.info(name);
  if (info.dtype != "I64" && info.dtype != "I32")
    throw io::FormatError(path + ": \"" + name + "\" must be I64, got " + info.dtype);
  auto t = models::readTensor(file, name, torch::kLong);
  if (t.sizes() != ids.sizes())
    throw io::FormatError(path + ": \"" + name + "\" is " + models::shapeString(t.sizes().vec()) +
                          ", not [B, T] like input_ids " + models::shapeString(ids.sizes().vec()));
  if (t.numel() > 0 && (t.min().item<int64_t>() < 0 || t.max().item<int64_t>() >= limit))
    throw io::FormatError(path + ": \"" + name + "\" values must lie in [0, " + std::to_string(limit) + ")");
  return t;
}

// input_ids [B, T] and, when the file has them, attention_mask (0/1) and token_type_ids (< the
// model's type_vocab_size), checked here so that a bad file is named rather than failing inside the model.
torch::Tensor readInputs(const std::string& path, const models::ModelConfig& config, models::ForwardOptions& options) {
  const auto file = io::SafetensorsFile::open(path);
  if (!file.contains("input_ids")) throw io::FormatError(path + ": no tensor \"input_ids\"");
  if (file.info("input_ids").dtype != "I64" && file.info("input_ids").dtype != "I32")
    throw io::FormatError(path + ": \"input_ids\" must be I64, got " + file.info("input_ids").dtype);
  const auto ids = models::readTensor(file, "input_ids", torch::kLong);
  if (ids.dim() != 2) throw io::FormatError(path + ": \"input_ids\" must be [B, T]");
  if (ids.numel() > 0 && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= config.vocabSize))
    throw io::FormatError(path + ": token ids must lie in [0, " + std::to_string(config.vocabSize) + ")");
  if (file.contains("attention_mask")) options.attentionMask = readIdsLike(file, path, "attention_mask", ids, 2);
  if (file.contains("token_type_ids"))
    options.tokenTypes = readIdsLike(file, path, "token_type_ids", ids, std::max<int64_t>(config.typeVocabSize, 1));
  return ids;
}

// Prints each tensor's error against the reference file; 2 when any differs or is missing a
// shape match, else 0.
int compareWithReference(const std::string& refPath, const std::vector<std::pair<std::string, torch::Tensor>>& mine) {
  const auto ref = io::SafetensorsFile::open(refPath);
  int status = 0;
  for (const auto& [name, tensor] : mine) {
    if (!ref.contains(name)) {
      std::printf("  %-10s not in %s\n", name.c_str(), refPath.c_str());
      continue;
    }
    const auto theirs = models::readTensor(ref, name);
    if (theirs.sizes() != tensor.sizes()) {
      std::printf("  %-10s shape %s here, %s in the reference\n", name.c_str(),
                  models::shapeString(tensor.sizes().vec()).c_str(), models::shapeString(theirs.sizes().vec()).c_str());
      status = 2;
      continue;
    }
    const double err = relativeError(tensor, theirs);
    const bool within = err < 1e-4;  // false for NaN
    std::printf("  %-10s max |diff| / max |ref| = %.3g %s\n", name.c_str(), err,
                within ? "(within 1e-4)" : "(MISMATCH)");
    if (!within) status = 2;
  }
  return status;
}

int runForward(const ForwardArgs& a) {
  hh::initRuntime();
  const auto load = jobs::loadOptions(a.device);
  auto model = models::loadModel(a.modelDir, load);
  models::ForwardOptions options;
  const auto ids = readInputs(a.idsPath, model->config(), options);
  models::CaptureRequest request;
  request.linearWeights = !a.softmaxOnly;
  options.capture = &request;
  at::NoGradGuard noGrad;
  if (options.attentionMask.defined()) options.attentionMask = options.attentionMask.to(load.device);
  if (options.tokenTypes.defined()) options.tokenTypes = options.tokenTypes.to(load.device);
  const auto out = model->forward(ids.to(load.device), options);
  std::vector<torch::Tensor> layers;
  for (const auto& c : out.captures)
    layers.push_back((c.linearWeights.defined() && !a.softmaxOnly ? c.linearWeights : c.softmaxWeights).to(torch::kFloat));
  const auto attentions = torch::stack(layers, 1).cpu().contiguous();  // [B,L,H,T,T]
  const auto logits = out.logits.to(torch::kFloat).cpu().contiguous();
  models::writeTensorFile(a.outPath, {{"input_ids", ids}, {"logits", logits}, {"attentions", attentions}},
                       {{"producer", std::string("hedgehog ") + engineVersion()},
                        {"model", model->config().describe()},
                        {"note", "logits [B,T,V]; attentions [B,L,H,T,T]: softmax weights, linear weights for converted layers"}});
  std::printf("%s on %s: logits %s, attentions %s -> %s\n", model->config().describe().c_str(),
              jobs::deviceLabelOf(*model).c_str(),
              models::shapeString(logits.sizes().vec()).c_str(), models::shapeString(attentions.sizes().vec()).c_str(),
              a.outPath.c_str());
  if (a.comparePath.empty()) return 0;
  return compareWithReference(a.comparePath, {{"logits", logits}, {"attentions", attentions}});
}

}  // namespace

void addForwardCommand(CLI::App& app) {
  auto args = std::make_shared<ForwardArgs>();
  auto* cmd = app.add_subcommand("forward", "Run a model on token ids and write logits and attention weights (for parity checks)");
  cmd->add_option("model", args->modelDir, "Model folder (config.json + model.safetensors)")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--ids", args->idsPath, "safetensors file with I64 input_ids [B,T] (optional attention_mask, token_type_ids)")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", args->outPath, "Output safetensors: input_ids, logits, attentions")->required();
  cmd->add_option("--compare", args->comparePath, "Reference safetensors to diff logits/attentions against (exit 2 on mismatch)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--softmax-attentions", args->softmaxOnly, "Write softmax weights for converted layers too");
  addDeviceOption(cmd, args->device);
  cmd->callback([args] {
    const int rc = runForward(*args);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace hh::cli

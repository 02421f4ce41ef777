// `hedgehog forward MODEL_DIR --ids IDS.safetensors --out OUT.safetensors [--compare REF]`:
// runs a model on the I64 tensor `input_ids` [B, T] (optional `attention_mask` and
// `token_type_ids` [B, T] in the same file) and writes `logits` (F32, [B, T, V] or [B, labels])
// and `attentions` (F32, [B, L, H, T, T]: the softmax weights, or the linear weights of converted
// layers) — the layout of the fixture's reference file, so users can diff it against their own
// implementation. --compare prints the relative error of each tensor against a reference file.
#include <torch/types.h>

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

double relativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  const double scale = bd.abs().max().item<double>();
  const double err = (ad - bd).abs().max().item<double>();
  return scale > 0 ? err / scale : err;
}

int runForward(const ForwardArgs& a) {
  hh::initRuntime();
  const auto load = jobs::loadOptions(a.device);
  auto model = models::loadModel(a.modelDir, load);
  const auto idsFile = io::SafetensorsFile::open(a.idsPath);
  if (!idsFile.contains("input_ids")) throw io::FormatError(a.idsPath + ": no tensor \"input_ids\"");
  if (idsFile.info("input_ids").dtype != "I64" && idsFile.info("input_ids").dtype != "I32")
    throw io::FormatError(a.idsPath + ": \"input_ids\" must be I64, got " + idsFile.info("input_ids").dtype);
  const auto ids = models::readTensor(idsFile, "input_ids", torch::kLong);
  if (ids.dim() != 2) throw io::FormatError(a.idsPath + ": \"input_ids\" must be [B, T]");
  const int64_t vocab = model->config().vocabSize;
  if (ids.numel() > 0 && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= vocab))
    throw io::FormatError(a.idsPath + ": token ids must lie in [0, " + std::to_string(vocab) + ")");

  models::ForwardOptions options;
  if (idsFile.contains("attention_mask")) options.attentionMask = models::readTensor(idsFile, "attention_mask", torch::kLong);
  if (idsFile.contains("token_type_ids")) options.tokenTypes = models::readTensor(idsFile, "token_type_ids", torch::kLong);
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
  const auto ref = io::SafetensorsFile::open(a.comparePath);
  int status = 0;
  for (const auto& [name, mine] : std::vector<std::pair<std::string, torch::Tensor>>{{"logits", logits}, {"attentions", attentions}}) {
    if (!ref.contains(name)) {
      std::printf("  %-10s not in %s\n", name.c_str(), a.comparePath.c_str());
      continue;
    }
    const auto theirs = models::readTensor(ref, name);
    if (theirs.sizes() != mine.sizes()) {
      std::printf("  %-10s shape %s here, %s in the reference\n", name.c_str(), models::shapeString(mine.sizes().vec()).c_str(),
                  models::shapeString(theirs.sizes().vec()).c_str());
      status = 2;
      continue;
    }
    const double err = relativeError(mine, theirs);
    std::printf("  %-10s max |diff| / max |ref| = %.3g %s\n", name.c_str(), err, err < 1e-4 ? "(within 1e-4)" : "(MISMATCH)");
    if (err >= 1e-4) status = 2;
  }
  return status;
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

// `hedgehog inspect MODEL_DIR [--text "..." | --text-file FILE] [--adapters FILE] [--out maps.safetensors]`:
// runs the model on a text and prints, per layer and head, the softmax entropy and — for
// converted layers — KL(softmax || linear), the linear entropy and the monotonicity (Spearman);
// for causal models also what kind of head each softmax head is (metrics::headPatterns: its
// weight on the previous token, on the first token, and to what followed the current token last
// time, induction), then the most distinctive head of each kind.
// --out writes the tokens' ids and every layer's softmax (and linear) weights for other tools.
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/core/runtime.h"
#include "engine/data/text_corpus.h"
#include "engine/io/safetensors.h"
#include "engine/io/text_file.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/models/tensor_file.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::cli {
namespace {

std::string numberCell(double x) {  // 12 wide, "-" for none
  char b[32];
  if (std::isnan(x)) std::snprintf(b, sizeof b, "%12s", "-");
  else std::snprintf(b, sizeof b, "%12.5g", x);
  return b;
}

std::string shareCell(double x) {  // 9 wide, 3 decimals, "-" for none
  char b[16];
  if (std::isnan(x)) std::snprintf(b, sizeof b, "%9s", "-");
  else std::snprintf(b, sizeof b, "%9.3f", x);
  return b;
}

// The table: one row per layer and head, then the mean KL of the converted heads.
void printHeadTable(const jobs::ProbeResult& probe) {
  const auto& m = probe.heads;
  const int L = m.kl.layers, H = m.kl.heads;
  std::printf("%5s %4s %12s %12s %12s %12s %9s %9s %9s\n", "layer", "head", "H(softmax)", "H(linear)", "KL", "spearman",
              "previous", "first", "induction");
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const auto at = [&](const jobs::HeadTable& t) { return t.values[static_cast<size_t>(l * H + h)]; };
      std::printf("%5d %4d %s %s %s %s %s %s %s\n", l, h, numberCell(at(m.entropySoftmax)).c_str(),
                  numberCell(at(m.entropyLinear)).c_str(), numberCell(at(m.kl)).c_str(),
                  numberCell(at(m.monotonicity)).c_str(), shareCell(at(probe.previousToken)).c_str(),
                  shareCell(at(probe.firstToken)).c_str(), shareCell(at(probe.induction)).c_str());
    }
  if (!std::isnan(m.meanKl())) std::printf("mean KL over converted heads: %.4g\n", m.meanKl());
}

// The head with the largest weight on each pattern (previous token, first token, induction).
void printDistinctiveHeads(const jobs::ProbeResult& probe) {
  const int H = probe.heads.kl.heads;
  std::printf("most distinctive softmax heads (layer, head: mean weight on the pattern):\n");
  for (const auto* t : {&probe.previousToken, &probe.firstToken, &probe.induction}) {
    const auto best = std::max_element(t->values.begin(), t->values.end(), [](double x, double y) {
      return std::isnan(x) || (!std::isnan(y) && y > x);
    });
    if (best == t->values.end() || std::isnan(*best)) continue;
    const auto i = int(best - t->values.begin());
    std::printf("  %-15s layer %d, head %d: %.3f\n", t->name.c_str(), i / H, i % H, *best);
  }
}

// input_ids [1, T] and every layer's softmax (and linear) weights [1, L, H, T, T] as safetensors.
void writeAttentions(models::TransformerModel& model, const torch::Tensor& input, const std::string& text,
                     const std::string& path) {
  at::NoGradGuard noGrad;
  models::CaptureRequest capture;
  models::ForwardOptions options;
  options.capture = &capture;
  options.teacher = true;
  options.computeLogits = false;
  const auto out = model.forward(input, options);
  std::vector<torch::Tensor> softmax, linear;
  for (const auto& c : out.captures) {
    softmax.push_back(c.softmaxWeights.to(torch::kFloat));
    linear.push_back(c.linearWeights.defined() ? c.linearWeights.to(torch::kFloat)
                                               : torch::full_like(c.softmaxWeights, NAN).to(torch::kFloat));
  }
  std::vector<std::pair<std::string, torch::Tensor>> tensors{{"input_ids", input},
                                                             {"softmax_attentions", torch::stack(softmax, 1).contiguous()}};
  if (model.config().plan.anyLinear()) tensors.emplace_back("linear_attentions", torch::stack(linear, 1).contiguous());
  models::writeTensorFile(path, tensors, {{"text", text}, {"model", model.config().describe()}});
  std::printf("attentions [1, L, H, T, T] written to %s\n", path.c_str());
}

}  // namespace

void addInspectCommand(CLI::App& app) {
  struct Args {
    std::string model, text = "The quick brown fox jumps over the lazy dog, and then it runs back home again.", textFile,
                adapters, out, device, dtype;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("inspect", "Per-layer, per-head attention statistics of a model on a text");
  cmd->add_option("model", a->model, "Model folder (original or converted)")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--text", a->text, "Text to run (default: a short English sentence)");
  cmd->add_option("--text-file", a->textFile, "Read the text from this file instead")->check(CLI::ExistingFile);
  cmd->add_option("--adapters", a->adapters, "Adapter file (feature maps) to apply on top of the model")->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "Write input_ids and attentions (softmax, and linear for converted layers) to this safetensors file");
  addDeviceOption(cmd, a->device);
  addDtypeOption(cmd, a->dtype);
  cmd->callback([a] {
    hh::initRuntime();
    const auto load = jobs::loadOptions(a->device, a->dtype);
    auto model = models::loadModel(a->model, load);
    refuseOutputInside(a->out, "--out", a->model);
    if (!a->adapters.empty()) models::loadAdaptersFile(*model, a->adapters);
    const auto tokenizer = jobs::loadTokenizerFor(*model, a->model);
    if (!a->textFile.empty()) a->text = data::readUtf8File(a->textFile);
    // The text framed as the model saw texts in training (Llama: <s> first; BERT: [CLS] ... [SEP]).
    auto ids = tokenizer->encode(a->text, /*addSpecialTokens=*/true);
    if (ids.size() < 2) throw std::runtime_error("the text gives fewer than 2 tokens");
    const auto positions = static_cast<size_t>(model->config().maxPositions);
    if (ids.size() > positions) {
      std::fprintf(stderr, "note: the text is %zu tokens; cut to the model's %zu positions\n", ids.size(), positions);
      tokenizer->truncateFramed(ids, positions);
      a->text = tokenizer->decode(ids, /*skipSpecialTokens=*/true);  // what --out records is what ran
    }
    const auto input = torch::tensor(ids, torch::kLong).unsqueeze(0).to(load.device);  // [1,T]
    jobs::ProbeRequest request;
    request.patterns = model->config().causal;
    const auto probe = jobs::probeAttention(*model, input, {}, request);
    std::printf("%s | %zu tokens | %s\n", model->config().describe().c_str(), ids.size(),
                jobs::deviceLabelOf(*model).c_str());
    printHeadTable(probe);
    if (request.patterns) printDistinctiveHeads(probe);
    if (!a->out.empty()) writeAttentions(*model, input, a->text, a->out);
  });
}

}  // namespace hh::cli

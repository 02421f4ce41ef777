// `hedgehog compare`: every feature map against softmax on one attention head (KL, entropy,
// monotonicity), then a short Hedgehog distillation of that head showing the KL fall. The
// interim main job until the conversion demo lands.
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <chrono>
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/attention/feature_map.h"
#include "engine/attention/linear_attention.h"
#include "engine/attention/softmax_attention.h"
#include "engine/core/runtime.h"
#include "engine/metrics/attention_metrics.h"

namespace hh::cli {

namespace {
struct CompareArgs {
  int64_t length = 256;
  int64_t headDim = 64;
  int64_t steps = 300;
  double lr = 0.01;
  uint64_t seed = 0;
};

struct HeadStats {
  double kl, entropy, spearman;
};

HeadStats statsOf(const torch::Tensor& p, const torch::Tensor& a, const torch::Tensor& scores,
                  const torch::Tensor& valid) {
  return {metrics::headKl(p, a, valid).mean().item<double>(), metrics::headEntropy(a, valid).mean().item<double>(),
          metrics::headSpearman(scores, a, valid).mean().item<double>()};
}

// The largest the feature tensors of q and k may be together: Taylor's 1 + D + D^2 features at
// D = 512 and T = 8192 would be 17 GB, more than this machine class has.
constexpr double kFeatureBudgetBytes = 4.0 * (1 << 30);

// One row per untrained feature map: its weights' KL to softmax, entropy and monotonicity.
void printUntrainedMaps(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& p,
                        const torch::Tensor& scores, const torch::Tensor& valid) {
  const int64_t t = q.size(2), d = q.size(3);
  attn::RuleOptions ro;
  for (const auto kind : attn::untrainedComparisonKinds()) {
    attn::FeatureMapConfig fc;
    fc.kind = kind;
    fc.headDim = d;
    fc.expT = 2.0;
    fc.cosformerMaxLength = std::max<int64_t>(t, 4096);
    attn::FeatureMap fm(fc);
    const double bytes = 2.0 * static_cast<double>(t) * static_cast<double>(fm->featureDim()) * 4.0;
    if (bytes > kFeatureBudgetBytes) {
      std::printf("%-18s %12s %10s %10s   (skipped: %lld features x T=%lld would take %.1f GB)\n",
                  attn::toString(kind).c_str(), "-", "-", "-", (long long)fm->featureDim(), (long long)t, bytes / 1e9);
      continue;
    }
    at::NoGradGuard guard;
    // Queries are scaled by 1/sqrt(D) for maps that approximate exp(q.k) directly.
    const double s = std::pow(static_cast<double>(d), -0.25);
    const auto aw = attn::linearWeights(fm->forward(q * s), fm->forward(k * s), {}, ro);
    const auto st = statsOf(p, aw, scores, valid);
    if (std::isfinite(st.kl) && std::isfinite(st.entropy)) {
      std::printf("%-18s %12.4f %10.4f %10.4f\n", attn::toString(kind).c_str(), st.kl, st.entropy, st.spearman);
    } else {
      // Signed features (identity) give signed "weights": not a distribution, so no KL or entropy.
      std::printf("%-18s %12s %10s %10.4f   (signed weights: not a distribution)\n", attn::toString(kind).c_str(),
                  "n/a", "n/a", st.spearman);
    }
  }
}

// Distils a Hedgehog map onto the head (soft cross-entropy on the weights, Adam), printing the
// KL, entropy and monotonicity about six times on the way.
void distilHead(const CompareArgs& a, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& p,
                const torch::Tensor& scores, const torch::Tensor& valid) {
  const int64_t d = q.size(3);
  attn::FeatureMapConfig fc;
  fc.headDim = d;
  attn::FeatureMap fm(fc);
  torch::optim::Adam opt(fm->parameters(), torch::optim::AdamOptions(a.lr));
  const double s = std::pow(static_cast<double>(d), -0.25);
  attn::RuleOptions ro;
  std::printf("\nDistilling a Hedgehog feature map onto the head (%lld steps, lr %.3g)\n", (long long)a.steps, a.lr);
  for (int64_t step = 0; step <= a.steps; ++step) {
    const auto aw = attn::linearWeights(fm->forward(q * s), fm->forward(k * s), {}, ro);
    const auto loss = -(p * torch::log(aw + metrics::kKlEpsilon)).masked_fill(valid.logical_not(), 0.0).sum(-1).mean();
    if (step % std::max<int64_t>(a.steps / 6, 1) == 0 || step == a.steps) {
      const auto st = statsOf(p, aw.detach(), scores, valid);
      std::printf("  step %4lld  loss %.4f  KL %.4f  entropy %.4f  spearman %.4f\n", (long long)step,
                  loss.item<double>(), st.kl, st.entropy, st.spearman);
    }
    if (step == a.steps) break;
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

int runCompare(const CompareArgs& a) {
  const auto rt = hh::initRuntime();
  std::printf("hedgehog %s | torch %s | %s | %d threads\n", hh::engineVersion(), rt.torchVersion.c_str(),
              rt.device.c_str(), rt.intraOpThreads);
  torch::manual_seed(a.seed);
  // A peaked causal head: keys cluster around a few directions, queries near them, so softmax
  // attention is spiky (low entropy) the way trained heads often are.
  const int64_t t = a.length, d = a.headDim;
  const auto centres = torch::randn({8, d}) * 1.5;
  const auto pick = torch::randint(0, 8, {t});
  const auto k = (centres.index_select(0, pick) + 0.5 * torch::randn({t, d})).view({1, 1, t, d});
  const auto q = (centres.index_select(0, torch::randint(0, 8, {t})) + 0.5 * torch::randn({t, d})).view({1, 1, t, d});
  const auto valid = attn::validPairs(t, t, /*causal=*/true);
  const auto p = attn::softmaxWeights(q, k, true);
  const auto scores = attn::attentionScores(q, k);
  const auto ps = statsOf(p, p, scores, valid);
  std::printf("\nOne causal head, T=%lld, D=%lld (random clustered q/k, seed %llu)\n", (long long)t, (long long)d,
              (unsigned long long)a.seed);
  std::printf("%-18s %12s %10s %10s\n", "attention", "KL(sm||a)", "entropy", "spearman");
  std::printf("%-18s %12.4f %10.4f %10.4f\n", "softmax", 0.0, ps.entropy, ps.spearman);
  printUntrainedMaps(q, k, p, scores, valid);
  const auto start = std::chrono::steady_clock::now();
  distilHead(a, q, k, p, scores, valid);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("done in %.2f s\n", secs);
  return 0;
}
}  // namespace

void addCompareCommand(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  auto* cmd = app.add_subcommand("compare", "Compare every feature map with softmax on one head, then distil Hedgehog onto it");
  cmd->add_option("--length", args->length, "Sequence length T")->capture_default_str()->check(CLI::Range(4, 8192));
  cmd->add_option("--head-dim", args->headDim, "Head dimension D")->capture_default_str()->check(CLI::Range(2, 512));
  cmd->add_option("--steps", args->steps, "Distillation steps")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--lr", args->lr, "Learning rate")->check(finiteNumber(/*positive=*/true))->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->callback([args] { runCompare(*args); });
}

}  // namespace hh::cli

#include "engine/generation/sampling.h"

#include <torch/types.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace hh::gen {

void SamplingOptions::validate() const {
  if (!std::isfinite(temperature) || temperature < 0)
    throw std::invalid_argument("temperature must be >= 0 (0 = greedy), got " + std::to_string(temperature));
  if (topK < 0) throw std::invalid_argument("top_k must be >= 0 (0 = no limit), got " + std::to_string(topK));
  if (!(topP > 0.0 && topP <= 1.0)) throw std::invalid_argument("top_p must lie in (0, 1], got " + std::to_string(topP));
}

std::string SamplingOptions::describe() const {
  if (greedy()) return "greedy";
  std::ostringstream os;
  os << "temperature " << temperature;
  if (topK > 0) os << ", top-k " << topK;
  if (topP < 1.0) os << ", top-p " << topP;
  os << ", seed " << seed;
  return os.str();
}

namespace {
// The id of the largest logit, a NaN counting as impossible (argmax would pick it); throws when
// no logit is finite. One copy to the host: the maximum and its id together.
int64_t greedyId(const torch::Tensor& logits) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto clean = logits.detach().nan_to_num(-inf, std::numeric_limits<double>::max(), -inf);
  const auto id = clean.argmax();  // the first of equal maxima
  const auto both =
      torch::stack({clean.index_select(0, id.view(1)).squeeze(0).to(torch::kDouble), id.to(torch::kDouble)})
          .to(torch::kCPU);
  if (both[0].item<double>() == -inf) throw std::runtime_error("the model produced no finite logits to decode from");
  return static_cast<int64_t>(both[1].item<double>());
}
}  // namespace

torch::Tensor samplingDistribution(const torch::Tensor& logitsIn, const SamplingOptions& options) {
  // logits [V] -> probabilities [V] (double, CPU)
  TORCH_CHECK(logitsIn.dim() == 1 && logitsIn.size(0) > 0, "sampling needs logits [V]");
  const auto logits = logitsIn.detach().to(torch::kCPU, torch::kDouble);
  const int64_t V = logits.size(0);
  if (options.greedy()) {
    auto onehot = torch::zeros({V}, torch::kDouble);
    onehot[greedyId(logits)] = 1.0;
    return onehot;
  }
  auto scaled = logits / options.temperature;
  // A NaN logit would poison every probability: treat it as impossible.
  scaled = scaled.nan_to_num(-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::max(),
                             -std::numeric_limits<double>::infinity());
  const auto [sorted, order] = scaled.sort(/*dim=*/0, /*descending=*/true);  // [V]
  int64_t keep = V;
  if (options.topK > 0) keep = std::min(keep, options.topK);
  auto probs = torch::softmax(sorted.narrow(0, 0, keep), 0);  // [keep], renormalised over the top-k
  if (options.topP < 1.0) {
    // Smallest prefix whose mass reaches p: token i stays if the mass before it is < p.
    const auto before = probs.cumsum(0) - probs;
    const int64_t nucleus = std::max<int64_t>(1, (before < options.topP).sum().item<int64_t>());
    probs = probs.narrow(0, 0, nucleus);
    probs = probs / probs.sum();
    keep = nucleus;
  }
  auto out = torch::zeros({V}, torch::kDouble);
  out.index_put_({order.narrow(0, 0, keep)}, probs);
  return out;
}

Sampler::Sampler(SamplingOptions options) : options_(options), rng_(options.seed) { options_.validate(); }

int64_t Sampler::next(const torch::Tensor& logits) {
  if (options_.greedy()) return greedyId(logits);
  const auto probs = samplingDistribution(logits, options_);
  const auto nonzero = probs.nonzero().squeeze(1);  // ids with mass, ascending
  const auto mass = probs.index_select(0, nonzero);
  const auto* p = mass.data_ptr<double>();
  const auto* ids = nonzero.data_ptr<int64_t>();
  const int64_t n = mass.size(0);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += p[i];
  if (n == 0 || !std::isfinite(total) || total <= 0) throw std::runtime_error("the model produced no finite logits to sample from");
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[n - 1];
}

}  // namespace hh::gen

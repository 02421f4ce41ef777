// Recall probes (declared in recall_probe.h).
#include "engine/jobs/recall_probe.h"

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace hh::jobs {

namespace {

using Row = std::vector<int64_t>;

// Distinct random tokens in [first, vocab).
Row randomTokens(std::mt19937_64& rng, int64_t n, int64_t first, int64_t vocab) {
  std::uniform_int_distribution<int64_t> pick(first, vocab - 1);
  Row out;
  while (static_cast<int64_t>(out.size()) < n) {
    const int64_t t = pick(rng);
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

// Passkey: the needle at a random depth, the text ending with the whole needle again.
void passkeyRow(Row& row, std::mt19937_64& rng, const RecallProbeOptions& o, int64_t vocab, Row& answers, Row& targets) {
  const int64_t t = static_cast<int64_t>(row.size()), n = o.needle;
  const Row needle = randomTokens(rng, n, o.firstRandomToken, vocab);
  const int64_t start = std::uniform_int_distribution<int64_t>(1, t - 2 * n - 1)(rng);
  std::copy(needle.begin(), needle.end(), row.begin() + start);
  std::copy(needle.begin(), needle.end(), row.end() - n);
  for (int64_t a = o.cue; a < n; ++a) {
    answers.push_back(t - n + a - 1);  // the logits here predict needle[a]
    targets.push_back(start + a);      // where needle[a] was shown
  }
}

// MQAR: key-value pairs at distinct even offsets, then every key again (shuffled) with its value.
void mqarRow(Row& row, std::mt19937_64& rng, const RecallProbeOptions& o, int64_t vocab, Row& answers, Row& targets) {
  const int64_t t = static_cast<int64_t>(row.size()), m = o.pairs;
  const Row tokens = randomTokens(rng, 2 * m, o.firstRandomToken, vocab);  // keys, then values
  Row slots((t - 2 * m - 2) / 2);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  Row order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  Row shownAt(static_cast<size_t>(m));  // where each pair's key was put
  for (int64_t i = 0; i < m; ++i) {
    shownAt[static_cast<size_t>(i)] = 1 + 2 * slots[static_cast<size_t>(i)];
    row[static_cast<size_t>(shownAt[static_cast<size_t>(i)])] = tokens[static_cast<size_t>(i)];
    row[static_cast<size_t>(shownAt[static_cast<size_t>(i)] + 1)] = tokens[static_cast<size_t>(m + i)];
  }
  for (int64_t j = 0; j < m; ++j) {
    const int64_t pair = order[static_cast<size_t>(j)], query = t - 2 * m + 2 * j;
    row[static_cast<size_t>(query)] = tokens[static_cast<size_t>(pair)];
    row[static_cast<size_t>(query + 1)] = tokens[static_cast<size_t>(m + pair)];
    answers.push_back(query);                              // the logits here predict the value
    targets.push_back(shownAt[static_cast<size_t>(pair)] + 1);  // where the value was shown
  }
}

HeadTable nanTable(const char* name, int layers, int heads) {
  return {name, layers, heads, std::vector<double>(static_cast<size_t>(layers * heads), std::nan(""))};
}

// Accuracy of the argmax at the answer positions, and per head the mean weight from each answer
// position to its target (the linear weights of converted layers unless `teacher`).
std::pair<double, HeadTable> score(models::TransformerModel& model, const RecallPrompts& p, bool teacher,
                                   const std::function<void()>& checkpoint) {
  const int L = static_cast<int>(model.layerCount()), H = static_cast<int>(model.config().heads);
  auto mass = nanTable(teacher ? "needle_mass_teacher" : "needle_mass_converted", L, H);
  models::CaptureRequest capture;
  capture.linearWeights = !teacher;
  capture.consume = [&](models::LayerCapture& c) {
    if (checkpoint) checkpoint();
    const auto& w = c.linearWeights.defined() ? c.linearWeights : c.softmaxWeights;  // [B,H,T,T]
    const auto cpu = w.to(torch::kDouble).cpu();
    auto a = cpu.accessor<double, 4>();
    for (int h = 0; h < H; ++h) {
      double sum = 0;
      int64_t n = 0;
      for (size_t b = 0; b < p.answerPositions.size(); ++b)
        for (size_t i = 0; i < p.answerPositions[b].size(); ++i, ++n)
          sum += a[static_cast<int64_t>(b)][h][p.answerPositions[b][i]][p.needlePositions[b][i]];
      mass.values[static_cast<size_t>(c.layer * H + h)] = sum / double(std::max<int64_t>(n, 1));
    }
  };
  models::ForwardOptions options;
  options.capture = &capture;
  options.teacher = teacher;
  at::NoGradGuard noGrad;
  const auto predicted = model.forward(p.ids, options).logits.argmax(-1).cpu();  // [B,T]
  auto pred = predicted.accessor<int64_t, 2>();
  const auto ids = p.ids.cpu();
  auto id = ids.accessor<int64_t, 2>();
  int64_t right = 0, total = 0;
  for (size_t b = 0; b < p.answerPositions.size(); ++b)
    for (int64_t pos : p.answerPositions[b]) {
      right += pred[static_cast<int64_t>(b)][pos] == id[static_cast<int64_t>(b)][pos + 1] ? 1 : 0;
      ++total;
    }
  return {double(right) / double(std::max<int64_t>(total, 1)), mass};
}

}  // namespace

RecallPrompts makeRecallPrompts(const at::Tensor& filler, int64_t length, int64_t vocab, const RecallProbeOptions& o,
                                uint64_t seed) {
  const bool passkey = o.task == "passkey";
  if (!passkey && o.task != "mqar") throw std::invalid_argument("recall probe: task must be passkey or mqar, got \"" + o.task + "\"");
  const int64_t tail = passkey ? 2 * o.needle + 2 : 4 * o.pairs + 4;
  if (length < tail + 2) throw std::invalid_argument("recall probe: length " + std::to_string(length) + " is too short for the task");
  if (passkey && (o.cue < 1 || o.cue >= o.needle)) throw std::invalid_argument("recall probe: need 1 <= cue < needle");
  if (!passkey && o.pairs < 1) throw std::invalid_argument("recall probe: mqar needs at least 1 pair");
  if (o.trials < 1) throw std::invalid_argument("recall probe: trials must be at least 1");
  if (length > filler.size(1)) throw std::invalid_argument("recall probe: the filler rows hold " + std::to_string(filler.size(1)) +
                                                           " tokens, fewer than " + std::to_string(length));
  if (vocab - o.firstRandomToken < 2 * std::max(o.needle, o.pairs)) throw std::invalid_argument("recall probe: vocabulary too small");
  std::mt19937_64 rng(seed);
  RecallPrompts p;
  std::vector<at::Tensor> rows;
  for (int64_t b = 0; b < o.trials; ++b) {
    const auto source = filler[b % filler.size(0)].narrow(0, 0, length).contiguous().cpu();
    Row row(source.data_ptr<int64_t>(), source.data_ptr<int64_t>() + length), answers, targets;
    if (passkey) passkeyRow(row, rng, o, vocab, answers, targets);
    else mqarRow(row, rng, o, vocab, answers, targets);
    rows.push_back(torch::tensor(row, torch::kLong));
    p.answerPositions.push_back(answers);
    p.needlePositions.push_back(targets);
  }
  p.ids = torch::stack(rows).to(filler.device());
  return p;
}

RecallProbePoint scoreRecallPrompts(models::TransformerModel& model, const RecallPrompts& prompts,
                                    const std::function<void()>& checkpoint) {
  RecallProbePoint point;
  point.length = prompts.ids.size(1);
  std::tie(point.teacherAccuracy, point.teacherMass) = score(model, prompts, true, checkpoint);
  std::tie(point.convertedAccuracy, point.convertedMass) = score(model, prompts, false, checkpoint);
  return point;
}

std::vector<RecallProbePoint> runRecallProbe(models::TransformerModel& model, const at::Tensor& filler,
                                             const RecallProbeOptions& options) {
  std::vector<RecallProbePoint> out;
  for (const int64_t length : options.lengths) {
    if (model.config().maxPositions > 0 && length > model.config().maxPositions)
      throw std::invalid_argument("recall probe: length " + std::to_string(length) + " is past the model's " +
                                  std::to_string(model.config().maxPositions) + " positions");
    const auto prompts = makeRecallPrompts(filler, length, model.config().vocabSize, options, options.seed + uint64_t(length));
    out.push_back(scoreRecallPrompts(model, prompts));
  }
  return out;
}

}  // namespace hh::jobs

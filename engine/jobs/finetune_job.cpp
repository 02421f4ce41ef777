#include "engine/jobs/finetune_job.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <tuple>

#include "engine/core/runtime.h"
#include "engine/data/classification_data.h"
#include "engine/data/data_paths.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/data_parallel.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_session.h"
#include "engine/jobs/linear_cross_entropy.h"
#include "engine/jobs/training_support.h"
#include "engine/models/lora.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

bool isClassificationHead(const std::string& name) {
  return name.rfind("score", 0) == 0 || name.rfind("classifier", 0) == 0 || name.rfind("pooler", 0) == 0;
}

data::ClassificationDataset loadClassificationData(const ClassificationDataConfig& c, const tok::Tokenizer& tokenizer) {
  const auto corpus = c.path == "spam_assassin" ? data::readSpamAssassin(data::spamAssassinDir()) : data::readClassificationFile(c.path);
  data::ClassificationOptions options;
  options.sequenceLength = c.sequenceLength;
  options.validationFraction = c.validationFraction;
  options.seed = c.seed;
  options.maxExamples = c.maxExamples;
  auto dataset = data::buildClassificationDataset(corpus, tokenizer, options);
  if (dataset.train.ids.size(0) == 0 || dataset.validation.ids.size(0) == 0)
    throw std::invalid_argument("classification data \"" + c.path + "\" gives an empty train or validation split");
  return dataset;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The model with what trains (every weight, or LoRA factors and a classification head), and the
// task's data. Errors here are configuration errors: thrown before anything starts.
struct Setup {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  data::LmDataset lm;                      // task lm
  data::ClassificationDataset classes;     // task classification
  models::ModelPtr model;
  models::ModelPtr teacher;                // loss teacher_kl: the model folder, frozen, run as softmax
  std::unique_ptr<models::LoraAdapters> lora;
  std::vector<torch::Tensor> params;
  int64_t trainableParameters = 0;
  bool classification = false;
  int64_t trainRows() const { return classification ? classes.train.ids.size(0) : lm.train.size(0); }
  int64_t validationRows() const { return classification ? classes.validation.ids.size(0) : lm.validation.size(0); }
};

Setup prepare(const FinetuneConfig& config) {
  Setup s;
  // Frozen weights (and the teacher) in config.dtype; what trains in fp32.
  const auto load = loadOptions(config.device, config.dtype);
  s.classification = config.task == "classification";
  s.tokenizer = tok::loadTokenizer(config.modelDir);
  if (s.classification) {
    s.classes = loadClassificationData(config.classification, *s.tokenizer);
    const int64_t labels = std::max<int64_t>(static_cast<int64_t>(s.classes.labelNames.size()),
                                             s.classes.train.labels.max().item<int64_t>() + 1);
    moveTo(s.classes, load.device);
    s.model = models::loadModelForClassification(config.modelDir, std::max<int64_t>(labels, 2), load);
  } else {
    s.lm = loadLmData(config.data, *s.tokenizer);
    moveTo(s.lm, load.device);
    s.model = models::loadModel(config.modelDir, load);
    if (s.model->config().head != models::HeadKind::CausalLM || !s.model->config().causal)
      throw std::invalid_argument("finetune: task \"lm\" needs a causal LM (gpt2 or llama), not " + s.model->config().describe());
    if (config.loss == "teacher_kl") {
      s.teacher = models::loadModel(config.modelDir, load);
      s.teacher->eval();
      for (auto& p : s.teacher->parameters()) p.set_requires_grad(false);
    }
  }
  auto& model = *s.model;
  if (!config.adapters.empty()) models::loadAdaptersFile(model, config.adapters);
  model.train();
  model.freezeAllBut(true);  // adapters (feature maps, gates) train in both modes
  if (config.mode == "full") {
    std::set<const void*> adapters;
    for (const auto& [name, t] : model.adapterTensors()) adapters.insert(t.unsafeGetTensorImpl());
    for (auto& p : model.parameters())
      if (!adapters.count(p.unsafeGetTensorImpl())) p.set_requires_grad(true);
  } else {
    models::LoraOptions options;
    options.rank = config.loraRank;
    options.alpha = config.loraAlpha;
    options.seed = config.seed;
    s.lora = std::make_unique<models::LoraAdapters>(model, options);
    for (auto& item : model.named_parameters(true))
      if (isClassificationHead(item.key())) item.value().set_requires_grad(true);
  }
  applyComputeDtype(model, config.dtype);
  for (auto& p : model.parameters())
    if (p.requires_grad()) s.params.push_back(p);
  if (s.lora)
    for (const auto& p : s.lora->parameters()) s.params.push_back(p);
  for (const auto& p : s.params) s.trainableParameters += p.numel();
  return s;
}

// The task loss of one batch of this rank's rows (training mode).
torch::Tensor batchLoss(Setup& s, const torch::Tensor& rows) {
  if (s.lora) s.lora->apply();
  if (!s.classification) {
    const auto ids = s.lm.train.index_select(0, rows);  // [B,T]
    return s.teacher ? modelTeacherKlLoss(*s.model, *s.teacher, ids) : modelNextTokenLoss(*s.model, ids);
  }
  models::ForwardOptions options;
  options.attentionMask = s.classes.train.mask.index_select(0, rows);  // [B,T]
  const auto logits = s.model->forward(s.classes.train.ids.index_select(0, rows), options).logits;  // [B,labels]
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), s.classes.train.labels.index_select(0, rows));
}

// Held-out {val_loss, accuracy} of a classifier, the same on every rank (each evaluates its rows
// of every batch).
std::pair<double, double> classificationScore(const FinetuneConfig& config, Setup& s, TrainingSession& session) {
  auto& world = session.world();
  s.model->eval();
  std::vector<double> totals{0.0, 0.0, 0.0};  // loss sum, correct, count
  int64_t batches = 0;
  const auto& v = s.classes.validation;
  const int64_t n = v.ids.size(0);
  for (int64_t start = 0; start < n && (config.evalBatches <= 0 || batches < config.evalBatches); start += config.batchSize, ++batches) {
    if (!world.distributed()) throwIfCancelled(session.observer());  // a lone rank must not leave a collective
    const auto [first, last] = dist::shardRange(std::min(config.batchSize, n - start), world.rank(), world.size());
    const int64_t b = last - first;
    if (b == 0) continue;
    models::ForwardOptions options;
    options.attentionMask = v.mask.narrow(0, start + first, b);
    const auto logits = s.model->forward(v.ids.narrow(0, start + first, b), options).logits.to(torch::kFloat);  // [b,labels]
    const auto labels = v.labels.narrow(0, start + first, b);
    totals[0] += torch::nn::functional::cross_entropy(logits, labels).item<double>() * double(b);
    totals[1] += double(logits.argmax(-1).eq(labels).sum().item<int64_t>());
    totals[2] += double(b);
  }
  s.model->train();
  totals = world.sum(totals);
  return {totals[0] / std::max(totals[2], 1.0), totals[1] / std::max(totals[2], 1.0)};
}

// Held-out {val_loss, metric}: perplexity (lm) or accuracy (classification).
std::pair<double, double> evaluate(const FinetuneConfig& config, Setup& s, TrainingSession& session) {
  at::NoGradGuard noGrad;
  if (s.lora) s.lora->apply();
  if (s.classification) return classificationScore(config, s, session);
  const double loss = heldOutLmLoss(*s.model, s.lm.validation, config.batchSize, config.evalBatches, session.observer(),
                                    &session.world());
  return {loss, std::exp(loss)};
}

}  // namespace

FinetuneResult runFinetune(const FinetuneConfig& config, JobObserver& observer, dist::Communicator* communicator) {
  hh::initRuntime();
  torch::manual_seed(config.seed);
  TrainingSession session("finetune", config.runDir, observer, dist::Communicator::orAlone(communicator));
  auto& world = session.world();
  requireRowPerRank("finetune", config.batchSize, world);
  if (config.modelDir.empty()) throw std::invalid_argument("finetune: model is empty");
  FinetuneResult result;
  result.modelDir = config.outputDir.empty() ? (fs::path(config.runDir) / "model").string() : config.outputDir;
  Setup s = prepare(config);
  result.device = deviceLabelOf(*s.model);
  result.trainableParameters = s.trainableParameters;
  const std::string metric = s.classification ? "accuracy" : "perplexity";

  // Trained values (LoRA A/B, heads, or every weight), optimizer state and counters in one file
  // (training_checkpoint.h): resume rebuilds the same model and LoRA, then loads it.
  torch::optim::AdamW optimizer(s.params, torch::optim::AdamWOptions(config.lr).weight_decay(config.weightDecay));
  session.stopping.patience = config.patience;
  const bool resuming = session.resuming(config.resume);
  if (resuming) {
    const auto j = session.loadCheckpoint(optimizer);
    result.initialValidationLoss = counterNumber(j, "initial_val_loss", kNaN);
    result.initialMetric = counterNumber(j, "initial_metric", kNaN);
    result.finalValidationLoss = counterNumber(j, "val_loss", kNaN);
    result.finalMetric = counterNumber(j, "metric", kNaN);
  }
  startTogether(world, s.params, session.step);
  runs::RunHeader header;
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName(deviceLabelOf(*s.model), world);
  header.layout.scalars = {{"loss", "nats"}, {"lr"}, {"grad_norm"}, {"val_loss", "nats"}, {metric}};
  session.open(header, config.resume, config.steps);
  session.log("finetune " + s.model->config().describe() + " | " + config.mode + " | task " + config.task +
              (s.teacher ? " (loss: KL to the teacher)" : "") + " | " +
              std::to_string(result.trainableParameters) + " of " + std::to_string(s.model->parameterCount()) +
              " parameters train | train " + std::to_string(s.trainRows()) + " rows, validation " +
              std::to_string(s.validationRows()) + (resuming ? " | resumed at step " + std::to_string(session.step) : "") +
              dataParallelNote(world, config.batchSize, "rows"));

  BatchSampler sampler(s.trainRows(), config.batchSize, config.seed, jobDevice(config.device));
  sampler.skip(session.step);
  TrainingHooks hooks;
  hooks.failureHint = " (try a lower lr)";
  hooks.start = [&] {
    if (resuming) return;
    observer.progress(0, config.steps, "evaluating the starting model");
    std::tie(result.initialValidationLoss, result.initialMetric) = evaluate(config, s, session);
    session.record(0, {{"val_loss", result.initialValidationLoss}, {metric, result.initialMetric}});
    session.log("step 0: val_loss " + std::to_string(result.initialValidationLoss) + ", " + metric + " " +
                std::to_string(result.initialMetric));
    session.stopping.bestLoss = result.initialValidationLoss;
    result.finalValidationLoss = result.initialValidationLoss;
    result.finalMetric = result.initialMetric;
  };
  // Every rank draws the same global batch and trains on its rows; its gradient, weighted by its
  // share, summed over ranks is the gradient of the whole batch (then clipped).
  hooks.step = [&](int64_t step, double) {
    optimizer.zero_grad();
    const auto shard = shardOf(sampler.next(), world);
    auto loss = batchLoss(s, shard.rows);
    if (step == config.debugNanAtStep) loss = loss * std::numeric_limits<float>::quiet_NaN();
    const double localLoss = loss.item<double>();
    if (std::isfinite(localLoss)) loss.backward();
    StepReport report;
    report.loss = world.reduceGradients(s.params, shard.share, {localLoss * shard.share}).front();
    if (std::isfinite(report.loss)) report.gradNorm = clipGradients(s.params, config.gradClip);
    report.scalars["grad_norm"] = report.gradNorm;
    return report;
  };
  hooks.evaluate = [&](int64_t step, double loss, std::string& line) {
    std::tie(result.finalValidationLoss, result.finalMetric) = evaluate(config, s, session);
    line = "step " + std::to_string(step) + ": loss " + std::to_string(loss) + ", val_loss " +
           std::to_string(result.finalValidationLoss) + ", " + metric + " " + std::to_string(result.finalMetric);
    return std::map<std::string, double>{{"val_loss", result.finalValidationLoss}, {metric, result.finalMetric}};
  };
  hooks.saveCheckpoint = [&] {
    session.saveCheckpoint(optimizer, {{"initial_val_loss", result.initialValidationLoss},
                                       {"initial_metric", result.initialMetric},
                                       {"val_loss", result.finalValidationLoss},
                                       {"metric", result.finalMetric}});
  };
  session.train(optimizer, LrSchedule{config.lr, config.warmupSteps, config.minLrRatio}, config.steps, config.evalEvery,
                "finetuning", hooks);

  // Rank 0 saves the last good weights as a plain model (LoRA merged in) after the checkpoint,
  // which holds the unmerged LoRA factors that resume continues from.
  const bool main = session.finish(
      nullptr,
      [&] {
        if (s.lora) s.lora->merge();
        s.model->eval();
        models::saveModel(*s.model, result.modelDir, config.modelDir);
      },
      result.modelDir,
      [&] {
        return "validation loss " + std::to_string(result.initialValidationLoss) + " -> " +
               std::to_string(result.finalValidationLoss) + ", " + metric + " " + std::to_string(result.initialMetric) +
               " -> " + std::to_string(result.finalMetric);
      });
  result.status = session.status();
  result.message = session.message();
  result.steps = session.step;
  result.bestStep = session.stopping.bestStep;
  result.bestValidationLoss = session.stopping.bestLoss;
  result.runFile = main ? session.runFile() : "";
  if (!main) result.modelDir.clear();
  result.seconds = session.seconds();
  return result;
}

}  // namespace hh::jobs

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
#include "engine/distributed/communicator.h"
#include "engine/jobs/data_parallel.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/linear_cross_entropy.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_session.h"
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
  const auto corpus = data::readClassificationCorpus(c.path);
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

// The model with what trains (every weight, or LoRA factors and a classification head), and the
// task's data. Errors here are configuration errors: thrown before anything starts.
struct FinetuneSetup {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  data::LmDataset lm;                   // task lm
  data::ClassificationDataset classes;  // task classification
  models::ModelPtr model;
  models::ModelPtr teacher;  // loss teacher_kl: the model folder, frozen, run as softmax
  std::unique_ptr<models::LoraAdapters> lora;
  std::vector<torch::Tensor> params;
  int64_t trainableParameters = 0;
  bool classification = false;
  int64_t trainRows() const { return classification ? classes.train.ids.size(0) : lm.train.size(0); }
  int64_t validationRows() const { return classification ? classes.validation.ids.size(0) : lm.validation.size(0); }
};

// The task's data and the model to train (with a classification head for task classification),
// and for loss teacher_kl the frozen teacher, all on the config's device.
void loadDataAndModels(const FinetuneConfig& config, const models::LoadOptions& load, FinetuneSetup& s) {
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
      throw std::invalid_argument("finetune: task \"lm\" needs a causal LM (gpt2 or llama), not " +
                                  s.model->config().describe());
    if (config.loss == "teacher_kl") {
      s.teacher = models::loadModel(config.modelDir, load);
      s.teacher->eval();
      for (auto& p : s.teacher->parameters()) p.set_requires_grad(false);
    }
  }
  checkTokenizerFits(s.model->config().vocabSize, *s.tokenizer, config.modelDir);
}

// What trains: the adapters (feature maps, gates) always; then every weight (mode full) or LoRA
// factors on the attention projections and the classification head (mode lora).
void chooseTrainable(const FinetuneConfig& config, FinetuneSetup& s) {
  auto& model = *s.model;
  model.train();
  model.freezeAllBut(true);
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
}

FinetuneSetup prepareFinetuning(const FinetuneConfig& config, const dist::Communicator& world) {
  requireRowPerRank("finetune", config.batchSize, world);
  if (config.modelDir.empty()) throw std::invalid_argument("finetune: model is empty");
  FinetuneSetup s;
  // Frozen weights (and the teacher) in config.dtype; what trains in fp32.
  const auto load = loadOptions(config.device, config.dtype);
  loadDataAndModels(config, load, s);
  requireRowPerRank("finetune", config.batchSize, world, s.trainRows());
  if (!config.adapters.empty()) models::loadAdaptersFile(*s.model, config.adapters);
  chooseTrainable(config, s);
  applyComputeDtype(*s.model, config.dtype);
  for (auto& p : s.model->parameters())
    if (p.requires_grad()) s.params.push_back(p);
  if (s.lora)
    for (const auto& p : s.lora->parameters()) s.params.push_back(p);
  for (const auto& p : s.params) s.trainableParameters += p.numel();
  return s;
}

// The task loss of one batch of this rank's rows (training mode).
torch::Tensor batchLoss(FinetuneSetup& s, const torch::Tensor& rows) {
  if (s.lora) s.lora->apply();
  if (!s.classification) {
    const auto ids = s.lm.train.index_select(0, rows);  // [B,T]
    return s.teacher ? modelTeacherKlLoss(*s.model, *s.teacher, ids) : modelNextTokenLoss(*s.model, ids);
  }
  models::ForwardOptions options;
  options.attentionMask = s.classes.train.mask.index_select(0, rows);                               // [B,T]
  const auto logits = s.model->forward(s.classes.train.ids.index_select(0, rows), options).logits;  // [B,labels]
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), s.classes.train.labels.index_select(0, rows));
}

// Held-out {val_loss, accuracy} of a classifier, the same on every rank (each evaluates its rows
// of every batch).
std::pair<double, double> classificationScore(const FinetuneConfig& config, FinetuneSetup& s,
                                              TrainingSession& session) {
  auto& world = session.world();
  s.model->eval();
  std::vector<double> totals{0.0, 0.0, 0.0};  // loss sum, correct, count
  int64_t batches = 0;
  const auto& v = s.classes.validation;
  const int64_t n = v.ids.size(0);
  for (int64_t start = 0; start < n && (config.evalBatches <= 0 || batches < config.evalBatches);
       start += config.batchSize, ++batches) {
    if (!world.distributed()) throwIfCancelled(session.observer());  // a lone rank must not leave a collective
    const auto [first, last] = dist::shardRange(std::min(config.batchSize, n - start), world.rank(), world.size());
    const int64_t b = last - first;
    if (b == 0) continue;
    models::ForwardOptions options;
    options.attentionMask = v.mask.narrow(0, start + first, b);
    const auto logits =
        s.model->forward(v.ids.narrow(0, start + first, b), options).logits.to(torch::kFloat);  // [b,labels]
    const auto labels = v.labels.narrow(0, start + first, b);
    totals[0] += torch::nn::functional::cross_entropy(logits, labels).item<double>() * double(b);
    totals[1] += double(logits.argmax(-1).eq(labels).sum().item<int64_t>());
    totals[2] += double(b);
  }
  s.model->train();
  totals = world.sum(totals);
  return {totals[0] / std::max(totals[2], 1.0), totals[1] / std::max(totals[2], 1.0)};
}

// Held-out scores: val_loss, the metric (perplexity for lm, accuracy for classification) and,
// with the teacher_kl loss, val_kl: the training loss's own quantity on held-out rows (val_loss is
// the next-token loss, a different number).
struct HeldOutScores {
  double loss = kNaN, metric = kNaN, teacherKl = kNaN;
};

HeldOutScores heldOutScores(const FinetuneConfig& config, FinetuneSetup& s, TrainingSession& session) {
  at::NoGradGuard noGrad;
  if (s.lora) s.lora->apply();
  if (s.classification) {
    const auto [loss, accuracy] = classificationScore(config, s, session);
    return {loss, accuracy};
  }
  HeldOutScores scores;
  scores.loss = heldOutLmLoss(*s.model, s.lm.validation, config.batchSize, config.evalBatches, session.observer(),
                              &session.world());
  scores.metric = std::exp(scores.loss);
  if (s.teacher)
    scores.teacherKl = heldOutTeacherKl(*s.model, *s.teacher, s.lm.validation, config.batchSize, config.evalBatches,
                                        session.observer(), &session.world());
  return scores;
}

// The run file's header: scalars (the task's metric among them) and the config.
runs::RunHeader finetuneRunHeader(const FinetuneConfig& config, const FinetuneSetup& s, const dist::Communicator& world,
                                  const std::string& metric) {
  runs::RunHeader header;
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName(deviceLabelOf(*s.model), world);
  header.layout.scalars = {{"loss", "nats"}, {"lr"}, {"grad_norm"}, {"val_loss", "nats"}, {metric}};
  if (s.teacher) header.layout.scalars.push_back({"val_kl", "nats"});
  return header;
}

// One finetuning: the session, the model and what trains, and the hooks the shared loop calls.
// run() is the whole job.
class Finetuning {
 public:
  Finetuning(const FinetuneConfig& config, JobObserver& observer, dist::Communicator* communicator)
      : start_(config.seed),
        config_(config),
        observer_(observer),
        session_("finetune", config.runDir, observer, dist::Communicator::orAlone(communicator)),
        world_(session_.world()),
        s_(prepareFinetuning(config, world_)),
        metric_(s_.classification ? "accuracy" : "perplexity"),
        // Trained values (LoRA A/B, heads, or every weight), optimizer state and counters in one
        // file (training_checkpoint.h): resume rebuilds the same model and LoRA, then loads it.
        optimizer_(s_.params, torch::optim::AdamWOptions(config.lr).weight_decay(config.weightDecay)),
        sampler_(s_.trainRows(), config.batchSize, config.seed, jobDevice(config.device)) {
    result_.modelDir = config.outputDir.empty() ? (fs::path(config.runDir) / "model").string() : config.outputDir;
    result_.device = deviceLabelOf(*s_.model);
    result_.trainableParameters = s_.trainableParameters;
  }

  FinetuneResult run() {
    session_.stopping.patience = config_.patience;
    resuming_ = session_.resuming(config_.resume);
    if (resuming_) loadCounters();
    if (resuming_ && session_.alreadyEnded(config_.steps)) return ending();  // nothing written
    startTogether(world_, s_.params, session_.step);
    session_.open(finetuneRunHeader(config_, s_, world_, metric_), config_.resume, config_.steps);
    logStart();
    sampler_.skip(session_.step);
    session_.train(optimizer_, LrSchedule{config_.lr, config_.warmupSteps, config_.minLrRatio}, config_.steps,
                   config_.evalEvery, "finetuning", hooks());
    return finish();
  }

 private:
  void loadCounters() {
    const auto j = session_.loadCheckpoint(optimizer_);
    result_.initialValidationLoss = counterNumber(j, "initial_val_loss", kNaN);
    result_.initialMetric = counterNumber(j, "initial_metric", kNaN);
    result_.finalValidationLoss = counterNumber(j, "val_loss", kNaN);
    result_.finalMetric = counterNumber(j, "metric", kNaN);
  }

  void logStart() {
    const auto& model = *s_.model;
    session_.log("finetune " + model.config().describe() + " | " + config_.mode + " | task " + config_.task +
                 (s_.teacher ? " (loss: KL to the teacher)" : "") + " | " +
                 std::to_string(result_.trainableParameters) + " of " + std::to_string(model.parameterCount()) +
                 " parameters train | train " + std::to_string(s_.trainRows()) + " rows, validation " +
                 std::to_string(s_.validationRows()) +
                 (resuming_ ? " | resumed at step " + std::to_string(session_.step) : "") +
                 dataParallelNote(world_, config_.batchSize, "rows"));
  }

  TrainingHooks hooks() {
    TrainingHooks hooks;
    hooks.failureHint = " (try a lower lr)";
    hooks.start = [this] { evaluateStart(); };
    hooks.step = [this](int64_t step, double) { return trainStep(step); };
    hooks.evaluate = [this](int64_t step, double loss, std::string& line) { return evaluate(step, loss, line); };
    hooks.saveCheckpoint = [this] {
      session_.saveCheckpoint(optimizer_, {{"initial_val_loss", result_.initialValidationLoss},
                                           {"initial_metric", result_.initialMetric},
                                           {"val_loss", result_.finalValidationLoss},
                                           {"metric", result_.finalMetric}});
    };
    return hooks;
  }

  void evaluateStart() {
    if (resuming_) return;
    observer_.progress(0, config_.steps, "evaluating the starting model");
    const auto scores = heldOutScores(config_, s_, session_);
    result_.initialValidationLoss = scores.loss, result_.initialMetric = scores.metric;
    std::string line = "step 0: ";
    session_.record(0, heldOutRecord(scores, line));
    session_.log(line);
    session_.stopping.bestLoss = result_.initialValidationLoss;
    result_.finalValidationLoss = result_.initialValidationLoss;
    result_.finalMetric = result_.initialMetric;
  }

  // The scalars an evaluation records, and their text appended to `line`.
  std::map<std::string, double> heldOutRecord(const HeldOutScores& scores, std::string& line) const {
    std::map<std::string, double> values{{"val_loss", scores.loss}, {metric_, scores.metric}};
    line += "val_loss " + std::to_string(scores.loss) + ", " + metric_ + " " + std::to_string(scores.metric);
    if (s_.teacher) {
      values["val_kl"] = scores.teacherKl;
      line += ", val_kl " + std::to_string(scores.teacherKl);
    }
    return values;
  }

  // Every rank draws the same global batch and trains on its rows; its gradient, weighted by its
  // share, summed over ranks is the gradient of the whole batch (then clipped).
  StepReport trainStep(int64_t step) {
    optimizer_.zero_grad();
    const auto shard = shardOf(sampler_.next(), world_);
    auto loss = batchLoss(s_, shard.rows);
    if (step == config_.debugNanAtStep) loss = loss * std::numeric_limits<float>::quiet_NaN();
    const double localLoss = loss.item<double>();
    if (std::isfinite(localLoss)) loss.backward();
    StepReport report;
    report.loss = world_.reduceGradients(s_.params, shard.share, {localLoss * shard.share}).front();
    if (std::isfinite(report.loss)) report.gradNorm = clipGradients(s_.params, config_.gradClip);
    report.scalars["grad_norm"] = report.gradNorm;
    return report;
  }

  std::map<std::string, double> evaluate(int64_t step, double loss, std::string& line) {
    const auto scores = heldOutScores(config_, s_, session_);
    result_.finalValidationLoss = scores.loss, result_.finalMetric = scores.metric;
    line = "step " + std::to_string(step) + ": loss " + std::to_string(loss) + ", ";
    return heldOutRecord(scores, line);
  }

  // Rank 0 saves the last good weights as a plain model (LoRA merged in) after the checkpoint,
  // which holds the unmerged LoRA factors that resume continues from.
  FinetuneResult finish() {
    const auto saveModel = [this] {
      if (s_.lora) s_.lora->merge();
      s_.model->eval();
      models::saveModel(*s_.model, result_.modelDir, config_.modelDir);
    };
    session_.finish(nullptr, saveModel, result_.modelDir, [this] {
      const auto text = [](double v) { return std::to_string(v); };
      return "validation loss " + changeText(result_.initialValidationLoss, result_.finalValidationLoss, text) + ", " +
             metric_ + " " + changeText(result_.initialMetric, result_.finalMetric, text);
    });
    return ending();
  }

  FinetuneResult ending() {
    takeSessionEnding(result_, session_, session_.main());
    if (!session_.main()) result_.modelDir.clear();
    return result_;
  }

  JobStart start_;
  const FinetuneConfig& config_;
  JobObserver& observer_;
  TrainingSession session_;
  dist::Communicator& world_;
  FinetuneSetup s_;
  std::string metric_;
  torch::optim::AdamW optimizer_;
  BatchSampler sampler_;
  bool resuming_ = false;
  FinetuneResult result_;
};

}  // namespace

FinetuneResult runFinetune(const FinetuneConfig& config, JobObserver& observer, dist::Communicator* communicator) {
  return Finetuning(config, observer, communicator).run();
}

}  // namespace hh::jobs

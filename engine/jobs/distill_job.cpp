// Stage 1 of the conversion (see distill_job.h); the loop is the shared training session's.
#include "engine/jobs/distill_job.h"

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cmath>
#include <filesystem>

#include "engine/core/runtime.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/data_parallel.h"
#include "engine/jobs/distillation_loss.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_session.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

std::vector<torch::Tensor> cloneAdapters(const models::TransformerModel& model) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : model.adapterTensors()) out.push_back(t.detach().clone());
  return out;
}

void restoreAdapters(models::TransformerModel& model, const std::vector<torch::Tensor>& saved) {
  at::NoGradGuard noGrad;
  auto tensors = model.adapterTensors();
  for (size_t i = 0; i < tensors.size() && i < saved.size(); ++i) tensors[i].second.copy_(saved[i]);
}

// The teacher with the plan's feature maps, what trains, the data and the probe text.
struct DistillSetup {
  models::ModelPtr model;
  std::vector<torch::Tensor> params;  // the adapters that train
  data::LmDataset dataset;
  torch::Tensor probeIds;  // [1, P]
  std::vector<std::string> probeTokens;
  std::vector<std::pair<int, int>> pairs;  // snapshot (layer, head) pairs
  models::CaptureRequest capture;          // the converted layers' weights, with their graph
};

models::PlanKeys planKeys(const DistillConfig& c) {
  return {c.featureMap, c.rule, c.window, c.layers, c.plan, c.seed};
}

// Errors here are configuration errors: thrown before anything starts.
DistillSetup prepareDistillation(const DistillConfig& config, const dist::Communicator& world) {
  requireRowPerRank("distill", config.batchSize, world);
  DistillSetup s;
  // The frozen teacher's weights in config.dtype; the feature maps train in fp32.
  const auto load = loadOptions(config.device, config.dtype);
  s.model = models::loadModel(config.modelDir, load);
  const int64_t L = s.model->layerCount();
  s.model->setAttentionPlan(models::planFromKeys(planKeys(config), L));
  s.model->freezeAllBut(true);
  applyComputeDtype(*s.model, config.dtype);
  for (auto& [name, t] : s.model->adapterTensors())
    if (t.requires_grad()) s.params.push_back(t);
  if (s.params.empty())
    throw std::invalid_argument(s.model->config().plan.summary() + ": nothing to train; feature map \"" +
                                config.featureMap + "\" with rule \"" + config.rule +
                                "\" has nothing to train (choose hedgehog, hedgehog_softmax or t2r, or a gated rule)");
  const auto tokenizer = loadTokenizerFor(*s.model, config.modelDir);
  s.dataset = loadLmData(config.data, *tokenizer);
  requireRowPerRank("distill", config.batchSize, world, s.dataset.train.size(0));
  moveTo(s.dataset, load.device);
  calibrateWindowMix(*s.model, s.dataset.train.narrow(0, 0, std::min<int64_t>(2, s.dataset.train.size(0))));
  s.probeIds = torch::tensor(tokenizer->encode(config.probeText), torch::kLong).unsqueeze(0).to(load.device);
  for (int64_t i = 0; i < s.probeIds.size(1); ++i)
    s.probeTokens.push_back(tokenizer->decode({s.probeIds[0][i].item<int64_t>()}));
  s.pairs = config.snapshotPairs;
  const auto& plan = s.model->config().plan;
  if (s.pairs.empty())
    for (int64_t l = 0; l < L && s.pairs.size() < 4; ++l)
      if (plan.layers[static_cast<size_t>(l)].linear) s.pairs.emplace_back(static_cast<int>(l), 0);
  s.capture.softmaxWeights = true;
  s.capture.linearWeights = true;
  s.capture.outputs = config.outputMse > 0;
  s.capture.keepGraph = true;
  const int64_t length = config.data.sequenceLength;
  s.capture.additiveFeatures =
      fusedDistillLossRequested(load.device, config.batchSize * s.model->config().heads * length * length);
  for (int64_t l = 0; l < L; ++l)
    if (plan.layers[static_cast<size_t>(l)].linear) s.capture.layers.push_back(l);
  return s;
}

// The run file's layout: scalars, per-head tables, probe snapshots and curves, adapter weights.
runs::RunHeader distillRunHeader(const DistillConfig& config, const DistillSetup& s, const dist::Communicator& world) {
  runs::RunHeader header;
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName(deviceLabelOf(*s.model), world);
  auto& layout = header.layout;
  layout.scalars = {{"loss", "nats"}, {"lr"}, {"val_loss", "nats"}, {"kl_mean", "nats"}, {"step_seconds", "s"}};
  layout.layers = static_cast<int>(s.model->layerCount());
  layout.heads = static_cast<int>(s.model->config().heads);
  for (const auto& name : probeTableNames()) layout.tables.push_back({name, name == "monotonicity" ? "rho" : "nats"});
  for (const auto& [l, h] : s.pairs) layout.snapshots.pairs.push_back({l, h});
  layout.snapshots.tokens = s.probeTokens;
  layout.snapshots.size = static_cast<int>(std::min<int64_t>(config.snapshotSize, s.probeIds.size(1)));
  if (config.curveBins > 0) {  // teacher and student curves of every snapshot pair, on the probe text
    layout.curves.bins = config.curveBins;
    for (const auto& [l, h] : s.pairs)
      for (const auto& label : probeCurveLabels()) {
        layout.curves.pairs.push_back({l, h});
        layout.curves.labels.push_back(label);
      }
  }
  for (const auto& [name, t] : s.model->adapterTensors()) layout.weights.push_back({name, t.sizes().vec()});
  return header;
}

// Stage 1 needs no LM head and nothing after the last converted layer.
models::ForwardOptions teacherOptions(const DistillSetup& s) {
  models::ForwardOptions options;
  options.capture = &s.capture;
  options.teacher = true;
  options.computeLogits = false;
  options.stopAfterLayer = s.capture.layers.back();
  return options;
}

// Mean loss over up to evalBatches held-out batches; with several processes each takes its rows
// of every batch (weighted by its share) and one sum gives every rank the same value.
double validationLoss(const DistillConfig& config, DistillSetup& s, TrainingSession& session) {
  at::NoGradGuard noGrad;
  auto& world = session.world();
  double sum = 0;  // this rank's row-weighted losses
  int64_t batches = 0, rows = 0;
  const int64_t n = s.dataset.validation.size(0);
  for (int64_t start = 0; start < n && batches < config.evalBatches; start += config.batchSize, ++batches) {
    if (!world.distributed()) throwIfCancelled(session.observer());  // a lone rank must not leave a collective
    const int64_t b = std::min(config.batchSize, n - start);
    rows += b;
    const auto [first, last] = dist::shardRange(b, world.rank(), world.size());
    if (last == first) continue;
    const auto ids = s.dataset.validation.narrow(0, start + first, last - first);
    sum += distillLayerByLayer(*s.model, ids, s.capture, teacherOptions(s), config.loss, config.outputMse,
                               LayerPass::LossOnly) *
           double(last - first);
  }
  return world.sum(sum) / double(std::max<int64_t>(rows, 1));  // the mean over rows: a short last batch weighs less
}

// Rank 0's per-head tables on `probeRows` held-out rows, and with `withSnapshots` the probe text's
// maps and curves, into the run file. Returns the mean KL.
double probe(const DistillConfig& config, DistillSetup& s, runs::RunWriter& writer, int64_t step, bool withSnapshots) {
  const int64_t probeRows = config.probeRows > 0 ? config.probeRows : config.batchSize;
  ProbeRequest request;
  request.snapshotPairs = withSnapshots ? s.pairs : std::vector<std::pair<int, int>>{};
  request.snapshotSize = config.snapshotSize;
  const auto rows = s.dataset.validation.narrow(0, 0, std::min<int64_t>(probeRows, s.dataset.validation.size(0)));
  const auto measured = probeAttention(*s.model, rows, {}, request).heads;
  for (const auto* t : measured.tables()) writer.appendTable(step, t->name, t->values);
  if (withSnapshots) {
    request.tables = false;
    request.curveBins = config.curveBins;
    const auto probed = probeAttention(*s.model, s.probeIds, {}, request);
    appendSnapshots(writer, step, probed.snapshots);
    if (writer.layout().curves.enabled() && probed.curves.size() == writer.layout().curves.pairs.size())
      writer.appendCurves(step, probed.curves);
  }
  return measured.meanKl();
}

// One distillation: the session, the model and what trains, the best feature maps so far, and the
// hooks the shared loop calls. run() is the whole job.
class Distillation {
 public:
  Distillation(const DistillConfig& config, JobObserver& observer, dist::Communicator* communicator)
      : start_(config.seed),
        config_(config),
        observer_(observer),
        session_("distill", config.runDir, observer, dist::Communicator::orAlone(communicator)),
        world_(session_.world()),
        s_(prepareDistillation(config, world_)),
        optimizer_(s_.params, torch::optim::AdamWOptions(config.lr).weight_decay(config.weightDecay)),
        sampler_(s_.dataset.train.size(0), config.batchSize, config.seed, s_.dataset.train.device()) {
    result_.adaptersFile = (fs::path(config.runDir) / "adapters.safetensors").string();
    result_.device = deviceLabelOf(*s_.model);
  }

  DistillResult run() {
    session_.stopping.patience = config_.patience;
    std::map<std::string, torch::Tensor> savedBest;  // "best.<i>": the best feature maps so far
    resumed_ = session_.resuming(config_.resume);
    if (resumed_) {
      initialKl_ = counterNumber(session_.loadCheckpoint(optimizer_, &savedBest), "initial_kl", kNaN);
      if (session_.alreadyEnded(config_.steps)) return ending();  // nothing written
    }
    startTogether(world_, s_.params, session_.step);
    session_.open(distillRunHeader(config_, s_, world_), config_.resume, config_.steps);
    logStart();
    keepBest(savedBest);
    sampler_.skip(session_.step);
    session_.train(optimizer_, LrSchedule{config_.lr}, config_.steps, config_.evalEvery, "distilling", hooks());
    return finish();
  }

 private:
  void logStart() {
    if (!session_.main()) return;
    const auto& model = *s_.model;
    session_.log("distill " + model.config().describe() + " | " + model.config().plan.summary() + " | " +
                 std::to_string(s_.params.size()) + " trainable tensors | train " +
                 std::to_string(s_.dataset.train.size(0)) + " x " + std::to_string(s_.dataset.train.size(1)) +
                 " tokens, validation " + std::to_string(s_.dataset.validation.size(0)) +
                 dataParallelNote(world_, config_.batchSize, "sequences"));
  }

  // The best feature maps by validation loss; a resumed run keeps those it had found (not those
  // at the checkpoint), so its result is the uninterrupted run's.
  void keepBest(const std::map<std::string, torch::Tensor>& savedBest) {
    best_ = cloneAdapters(*s_.model);
    if (savedBest.size() != best_.size()) return;
    for (size_t i = 0; i < best_.size(); ++i) {
      const auto it = savedBest.find("best." + std::to_string(i));
      if (it != savedBest.end() && it->second.sizes() == best_[i].sizes()) best_[i] = it->second.to(best_[i].dtype());
    }
  }

  TrainingHooks hooks() {
    TrainingHooks hooks;
    hooks.kept = "the feature maps";
    hooks.keepsBest = true;
    hooks.failureHint = " (try a lower lr, or hedgehog_softmax)";
    hooks.stepSeconds = true;
    hooks.start = [this] { evaluateStart(); };
    hooks.step = [this](int64_t step, double) { return trainStep(step); };
    hooks.evaluate = [this](int64_t step, double loss, std::string& line) { return evaluate(step, loss, line); };
    hooks.improved = [this](int64_t) { best_ = cloneAdapters(*s_.model); };
    hooks.saveCheckpoint = [this] { saveCheckpoint(); };
    return hooks;
  }

  void evaluateStart() {
    if (resumed_) return;  // a checkpoint is written after the first evaluation only
    observer_.progress(session_.step, config_.steps, "evaluating the untrained feature maps");
    initialKl_ = session_.main() ? probe(config_, s_, *session_.writer(), session_.step, true) : kNaN;
    const double val = validationLoss(config_, s_, session_);
    session_.record(session_.step, session_.main()
                                       ? std::map<std::string, double>{{"val_loss", val}, {"kl_mean", initialKl_}}
                                       : std::map<std::string, double>{{"val_loss", val}});
    if (session_.main())
      session_.log("step " + std::to_string(session_.step) + ": val_loss " + std::to_string(val) + ", mean KL " +
                   std::to_string(initialKl_));
    session_.stopping.bestLoss = val;
    session_.stopping.bestStep = session_.step;
    if (!std::isfinite(val))
      session_.fail(std::string("the validation loss of the untrained feature maps is ") +
                    (std::isnan(val) ? "NaN" : "infinite") +
                    ": the teacher's attention or the maps overflow on this data (try hedgehog_softmax, or float32)");
  }

  // Every rank draws the same global batch and trains on its rows of it; its gradient, weighted
  // by its share, summed over ranks is the gradient of the whole batch.
  StepReport trainStep(int64_t step) {
    const auto shard = shardOf(sampler_.next(), world_);
    const auto ids = s_.dataset.train.index_select(0, shard.rows);  // [b, T]
    optimizer_.zero_grad();
    const double localLoss =
        distillLayerByLayer(*s_.model, ids, s_.capture, teacherOptions(s_), config_.loss, config_.outputMse,
                            LayerPass::Backward, step == config_.debugNanAtStep);
    StepReport report;
    report.loss = world_.reduceGradients(s_.params, shard.share, {localLoss * shard.share}).front();
    return report;
  }

  std::map<std::string, double> evaluate(int64_t step, double loss, std::string& line) {
    const double val = validationLoss(config_, s_, session_);
    const bool snapshots = step % config_.snapshotEvery == 0 || step == config_.steps;
    line = "step " + std::to_string(step) + ": loss " + std::to_string(loss) + ", val_loss " + std::to_string(val);
    if (!session_.main()) return {{"val_loss", val}};
    const double kl = probe(config_, s_, *session_.writer(), step, snapshots);
    session_.writer()->appendWeights(step, adapterFloats(*s_.model));
    line += ", mean KL " + std::to_string(kl);
    return {{"val_loss", val}, {"kl_mean", kl}};
  }

  // The checkpoint first (what resume reads, complete or not there at all), then the adapters
  // file users load; both are replaced atomically. The checkpoint holds the weights of the step it
  // names, so that a resume continues exactly the run it interrupted: at the end the model holds
  // the kept maps, and the step's are put back for the checkpoint alone.
  void saveCheckpoint() {
    std::vector<std::pair<std::string, torch::Tensor>> keep;
    for (size_t i = 0; i < best_.size(); ++i) keep.emplace_back("best." + std::to_string(i), best_[i]);
    if (stepWeights_.empty()) {
      session_.saveCheckpoint(optimizer_, {{"initial_kl", initialKl_}}, keep);
    } else {
      const auto kept = cloneAdapters(*s_.model);
      restoreAdapters(*s_.model, stepWeights_);
      session_.saveCheckpoint(optimizer_, {{"initial_kl", initialKl_}}, keep);
      restoreAdapters(*s_.model, kept);
    }
    models::saveAdapters(*s_.model, result_.adaptersFile);
  }

  DistillResult finish() {
    // Keep the best feature maps (by validation loss) unless the job failed before any gain.
    if (session_.status() != JobStatus::Failed || session_.stopping.bestStep > 0) {
      stepWeights_ = cloneAdapters(*s_.model);
      restoreAdapters(*s_.model, best_);
    }
    session_.finish([this] { measureFinalKl(); }, nullptr, result_.adaptersFile,
                    [this] {
                      return "best validation loss " + std::to_string(session_.stopping.bestLoss) + " at step " +
                             std::to_string(session_.stopping.bestStep) + "; mean KL " + std::to_string(initialKl_) +
                             " -> " + std::to_string(result_.finalKl);
                    });
    return ending();
  }

  DistillResult ending() {
    takeSessionEnding(result_, session_, session_.main());
    result_.initialKl = initialKl_;
    if (!session_.main()) result_.adaptersFile.clear();
    return result_;
  }

  void measureFinalKl() {
    if (session_.status() != JobStatus::Completed) return;
    const int64_t probeRows = config_.probeRows > 0 ? config_.probeRows : config_.batchSize;
    const auto rows = s_.dataset.validation.narrow(0, 0, std::min<int64_t>(probeRows, s_.dataset.validation.size(0)));
    result_.finalKl = probeAttention(*s_.model, rows, {}, ProbeRequest{}).heads.meanKl();
  }

  JobStart start_;
  const DistillConfig& config_;
  JobObserver& observer_;
  TrainingSession session_;
  dist::Communicator& world_;
  DistillSetup s_;
  torch::optim::AdamW optimizer_;
  BatchSampler sampler_;
  std::vector<torch::Tensor> best_;
  std::vector<torch::Tensor> stepWeights_;  // at the end: the last step's maps, for the checkpoint
  double initialKl_ = kNaN;
  bool resumed_ = false;
  DistillResult result_;
};

}  // namespace

DistillResult runDistill(const DistillConfig& config, JobObserver& observer, dist::Communicator* communicator) {
  return Distillation(config, observer, communicator).run();
}

}  // namespace hh::jobs

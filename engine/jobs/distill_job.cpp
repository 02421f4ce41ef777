#include "engine/jobs/distill_job.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "engine/attention/softmax_attention.h"
#include "engine/core/runtime.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/data_parallel.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_writer.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

torch::Tensor distillationLoss(const std::vector<models::LayerCapture>& captures, bool causal, const torch::Tensor& mask,
                               const std::string& loss, double outputMse) {
  torch::Tensor total;
  for (const auto& c : captures) {
    if (!c.linearWeights.defined()) continue;
    const auto p = c.softmaxWeights.to(torch::kFloat);   // [B,H,T,T] target, no gradient
    const auto a = c.linearWeights.to(torch::kFloat);    // [B,H,T,T]
    const int64_t T = p.size(-1);
    const auto valid = attn::validPairs(T, T, causal, mask.defined() ? mask.to(torch::kBool) : torch::Tensor(), p.device());
    auto perPair = -p * torch::log(a + 1e-10);           // soft cross-entropy
    if (loss == "kl") perPair = perPair + p * torch::log(p + 1e-10);
    perPair = perPair.masked_fill(valid.logical_not(), 0.0);
    // Rows with at least one valid key count in the mean; heads are summed (paper eq. 4).
    const auto rowValid = valid.any(-1).to(torch::kFloat).expand({p.size(0), p.size(1), T});  // [B,H,T]
    const std::vector<int64_t> batchAndRows{0, 2};
    const auto perHead = perPair.sum(-1).mul(rowValid).sum(batchAndRows) / rowValid.sum(batchAndRows).clamp_min(1.0);  // [H]
    auto layerLoss = perHead.sum();
    if (outputMse > 0 && c.linearOutput.defined())
      layerLoss = layerLoss + outputMse * (c.linearOutput.to(torch::kFloat) - c.softmaxOutput.to(torch::kFloat)).pow(2).mean();
    total = total.defined() ? total + layerLoss : layerLoss;
  }
  if (!total.defined()) throw std::invalid_argument("no converted layer in the captures: nothing to distill");
  return total;
}

double distillLayerByLayer(models::TransformerModel& model, const torch::Tensor& ids, models::CaptureRequest& capture,
                           models::ForwardOptions options, const std::string& loss, double outputMse, LayerPass pass,
                           bool poison) {
  const bool causal = model.config().causal;
  double total = 0;
  capture.consume = [&](models::LayerCapture& c) {
    auto term = distillationLoss({c}, causal, {}, loss, outputMse);
    if (poison) term = term * std::numeric_limits<float>::quiet_NaN();
    const double value = term.item<double>();
    total += value;
    if (pass == LayerPass::Backward && std::isfinite(value)) term.backward();
  };
  options.capture = &capture;
  try {
    model.forward(ids, options);
  } catch (...) {
    capture.consume = nullptr;
    throw;
  }
  capture.consume = nullptr;
  return total;
}

namespace {

struct Checkpoint {
  int64_t step = 0, bestStep = 0, evalsWithoutGain = 0;
  double bestLoss = std::numeric_limits<double>::infinity();
  double initialKl = std::numeric_limits<double>::quiet_NaN();
};

std::vector<torch::Tensor> cloneAdapters(const models::TransformerModel& model) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : model.adapterTensors()) out.push_back(t.detach().clone());
  return out;
}
void restoreAdapters(models::TransformerModel& model, const std::vector<torch::Tensor>& saved) {
  torch::NoGradGuard noGrad;
  auto tensors = model.adapterTensors();
  for (size_t i = 0; i < tensors.size() && i < saved.size(); ++i) tensors[i].second.copy_(saved[i]);
}

void checkCancel(JobObserver& observer) {
  if (observer.cancelled()) throw JobCancelled();
}

}  // namespace

DistillResult runDistill(const DistillConfig& config, JobObserver& observer, dist::Communicator* communicator) {
  const auto started = std::chrono::steady_clock::now();
  hh::initRuntime();
  torch::manual_seed(config.seed);
  dist::Communicator& world = dist::Communicator::orAlone(communicator);
  const bool main = world.isMain();  // rank 0 writes the run file, the checkpoint and the adapters
  if (config.runDir.empty()) throw std::invalid_argument("distill: run_dir is empty");
  requireRowPerRank("distill", config.batchSize, world);
  fs::create_directories(config.runDir);
  DistillResult result;
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  result.adaptersFile = (fs::path(config.runDir) / "adapters.safetensors").string();
  // Weights, optimizer state and counters in one file (training_checkpoint.h): never a pickle.
  const auto checkpointFile = (fs::path(config.runDir) / "checkpoint.safetensors").string();

  // ---- model, plan, data (errors here are configuration errors: thrown) ----
  auto model = models::loadModel(config.modelDir);
  const int64_t L = model->layerCount();
  attn::LinearAttentionConfig linear;
  linear.featureMap.kind = attn::parseFeatureMapKind(config.featureMap);
  linear.featureMap.seed = config.seed;
  linear.rule.rule = attn::parseUpdateRule(config.rule);
  model->setAttentionPlan(config.layers.empty() ? models::AttentionPlan::uniform(L, linear)
                                                : models::AttentionPlan::hybrid(L, config.layers, linear));
  model->freezeAllBut(true);
  std::vector<torch::Tensor> params;
  for (auto& [name, t] : model->adapterTensors())
    if (t.requires_grad()) params.push_back(t);
  if (params.empty())
    throw std::invalid_argument("feature map \"" + config.featureMap + "\" with rule \"" + config.rule +
                                "\" has nothing to train (choose hedgehog, hedgehog_softmax or t2r, or a gated rule)");
  const auto tokenizer = tok::loadTokenizer(config.modelDir);
  auto dataset = loadLmData(config.data, *tokenizer);
  const auto probeIds = torch::tensor(tokenizer->encode(config.probeText), torch::kLong).unsqueeze(0);  // [1,P]
  std::vector<std::string> probeTokens;
  for (int64_t i = 0; i < probeIds.size(1); ++i) probeTokens.push_back(tokenizer->decode({probeIds[0][i].item<int64_t>()}));
  auto pairs = config.snapshotPairs;
  if (pairs.empty())
    for (int64_t l = 0; l < L && pairs.size() < 4; ++l)
      if (model->config().plan.layers[static_cast<size_t>(l)].linear) pairs.emplace_back(static_cast<int>(l), 0);

  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(config.lr).weight_decay(config.weightDecay));
  Checkpoint state;
  if (config.resume) refuseLegacyCheckpoint(config.runDir, checkpointFile);
  std::map<std::string, torch::Tensor> savedBest;  // "best.<i>": the best feature maps so far
  if (config.resume && fs::exists(checkpointFile)) {
    const auto j = loadTrainingCheckpoint(checkpointFile, optimizer, &savedBest);
    state.step = j.at("step");
    state.bestStep = j.at("best_step");
    state.bestLoss = counterNumber(j, "best_loss", std::numeric_limits<double>::infinity());
    state.evalsWithoutGain = j.at("evals_without_gain");
    state.initialKl = counterNumber(j, "initial_kl", std::numeric_limits<double>::quiet_NaN());
  }
  startTogether(world, params, state.step);

  // ---- run file: everything declared before SWMR starts ----
  runs::RunHeader header;
  header.runId = makeRunId("distill");
  header.kind = "distill";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName(world);
  auto& layout = header.layout;
  layout.scalars = {{"loss", "nats"}, {"lr"}, {"val_loss", "nats"}, {"kl_mean", "nats"}, {"step_seconds", "s"}};
  layout.layers = static_cast<int>(L);
  layout.heads = static_cast<int>(model->config().heads);
  for (const auto& name : probeTableNames()) layout.tables.push_back({name, name == "monotonicity" ? "rho" : "nats"});
  for (const auto& [l, h] : pairs) layout.snapshots.pairs.push_back({l, h});
  layout.snapshots.tokens = probeTokens;
  layout.snapshots.size = static_cast<int>(std::min<int64_t>(config.snapshotSize, probeIds.size(1)));
  if (config.curveBins > 0) {  // teacher and student curves of every snapshot pair, on the probe text
    layout.curves.bins = config.curveBins;
    for (const auto& [l, h] : pairs)
      for (const auto& label : probeCurveLabels()) {
        layout.curves.pairs.push_back({l, h});
        layout.curves.labels.push_back(label);
      }
  }
  for (const auto& [name, t] : model->adapterTensors()) layout.weights.push_back({name, t.sizes().vec()});
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  if (config.resume && fs::exists(result.runFile)) {  // keep the old file: write a continuation beside it
    result.runFile = (fs::path(config.runDir) / ("run-resumed-" + std::to_string(state.step) + ".h5")).string();
  }
  std::optional<runs::RunWriter> writer;
  if (main) {
    writer = runs::RunWriter::create(result.runFile, header, writerOptions);
    observer.started(result.runFile, config.steps);
  }
  auto log = [&](const std::string& line) {  // rank 0 only: its lines carry the probe's KL
    if (!writer) return;
    writer->log(line, state.step);
    observer.log(line);
  };
  log("distill " + model->config().describe() + " | " + config.featureMap + "/" + config.rule + " | " +
      std::to_string(params.size()) + " trainable tensors | train " + std::to_string(dataset.train.size(0)) +
      " x " + std::to_string(dataset.train.size(1)) + " tokens, validation " + std::to_string(dataset.validation.size(0)) +
      dataParallelNote(world, config.batchSize, "sequences"));

  models::CaptureRequest capture;
  capture.softmaxWeights = true;
  capture.linearWeights = true;
  capture.outputs = config.outputMse > 0;
  capture.keepGraph = true;
  for (int64_t l = 0; l < L; ++l)
    if (model->config().plan.layers[static_cast<size_t>(l)].linear) capture.layers.push_back(l);
  // Stage 1 needs no LM head and nothing after the last converted layer.
  auto teacherOptions = [&]() {
    models::ForwardOptions options;
    options.capture = &capture;
    options.teacher = true;
    options.computeLogits = false;
    options.stopAfterLayer = capture.layers.back();
    return options;
  };

  // Mean loss over up to evalBatches held-out batches; with several processes each takes its
  // rows of every batch (weighted by its share) and one sum gives every rank the same value.
  auto validationLoss = [&]() {
    torch::NoGradGuard noGrad;
    double sum = 0;
    int64_t batches = 0;
    const int64_t n = dataset.validation.size(0);
    for (int64_t start = 0; start < n && batches < config.evalBatches; start += config.batchSize, ++batches) {
      if (!world.distributed()) checkCancel(observer);  // a lone rank must not leave a collective
      const int64_t b = std::min(config.batchSize, n - start);
      const auto [first, last] = dist::shardRange(b, world.rank(), world.size());
      if (last == first) continue;
      const auto ids = dataset.validation.narrow(0, start + first, last - first);
      sum += distillLayerByLayer(*model, ids, capture, teacherOptions(), config.loss, config.outputMse, LayerPass::LossOnly) *
             double(last - first) / double(b);
    }
    return world.sum(sum) / std::max<int64_t>(batches, 1);
  };
  const int64_t probeRows = config.probeRows > 0 ? config.probeRows : config.batchSize;
  // The per-head tables and snapshots (rank 0 only: it holds the run file).
  auto probe = [&](int64_t step, bool withSnapshots) {
    ProbeRequest request;
    request.snapshotPairs = withSnapshots ? pairs : std::vector<std::pair<int, int>>{};
    request.snapshotSize = config.snapshotSize;
    const auto tables = probeAttention(*model, dataset.validation.narrow(0, 0, std::min<int64_t>(probeRows, dataset.validation.size(0))),
                                       {}, request);
    for (const auto& t : tables.tables) writer->appendTable(step, t.name, t.values);
    observer.headTables(step, tables.tables);
    if (withSnapshots) {
      request.tables = false;
      request.curveBins = config.curveBins;
      const auto probed = probeAttention(*model, probeIds, {}, request);
      std::vector<float> softmaxMaps, linearMaps;
      const size_t cell = static_cast<size_t>(layout.snapshots.storedSize()) * layout.snapshots.storedSize();
      for (const auto& s : probed.snapshots) {
        softmaxMaps.insert(softmaxMaps.end(), s.softmax.begin(), s.softmax.end());
        if (s.linear.empty()) linearMaps.insert(linearMaps.end(), cell, std::numeric_limits<float>::quiet_NaN());
        else linearMaps.insert(linearMaps.end(), s.linear.begin(), s.linear.end());
      }
      if (probed.snapshots.size() == pairs.size()) writer->appendSnapshot(step, softmaxMaps, linearMaps);
      if (layout.curves.enabled() && probed.curves.size() == layout.curves.pairs.size()) writer->appendCurves(step, probed.curves);
      observer.snapshots(step, probed.snapshots, probeTokens);
    }
    return tables.meanKl;
  };
  // The checkpoint first (what resume reads, complete or not there at all), then the adapters
  // file users load; both are replaced atomically.
  std::vector<torch::Tensor> best;  // the feature maps of the best validation loss so far
  auto saveCheckpoint = [&]() {
    if (!main) return;
    std::vector<std::pair<std::string, torch::Tensor>> keep;
    for (size_t i = 0; i < best.size(); ++i) keep.emplace_back("best." + std::to_string(i), best[i]);
    saveTrainingCheckpoint(checkpointFile, optimizer,
                           {{"step", state.step}, {"best_step", state.bestStep}, {"best_loss", state.bestLoss},
                            {"evals_without_gain", state.evalsWithoutGain}, {"initial_kl", state.initialKl}},
                           keep);
    models::saveAdapters(*model, result.adaptersFile);
  };

  BatchSampler sampler(dataset.train.size(0), config.batchSize, config.seed);
  sampler.skip(state.step);
  auto lastGood = cloneAdapters(*model);
  best = lastGood;
  // A resumed run keeps the best feature maps it had found (not those at the checkpoint), so its
  // result is the uninterrupted run's.
  if (savedBest.size() == best.size())
    for (size_t i = 0; i < best.size(); ++i) {
      const auto it = savedBest.find("best." + std::to_string(i));
      if (it != savedBest.end() && it->second.sizes() == best[i].sizes()) best[i] = it->second.to(best[i].dtype());
    }
  try {
    if (std::isnan(state.initialKl)) {
      observer.progress(state.step, config.steps, "evaluating the untrained feature maps");
      state.initialKl = main ? probe(state.step, true) : 0.0;
      const double val = validationLoss();
      if (writer) writer->appendScalars(state.step, {{"val_loss", val}, {"kl_mean", state.initialKl}});
      observer.scalars(state.step, main ? std::map<std::string, double>{{"val_loss", val}, {"kl_mean", state.initialKl}}
                                        : std::map<std::string, double>{{"val_loss", val}});
      log("step " + std::to_string(state.step) + ": val_loss " + std::to_string(val) + ", mean KL " + std::to_string(state.initialKl));
      state.bestLoss = val;
      state.bestStep = state.step;
    }
    result.status = JobStatus::Completed;
    while (state.step < config.steps) {
      if (world.any(observer.cancelled())) throw JobCancelled();  // every rank stops at the same step
      const auto t0 = std::chrono::steady_clock::now();
      // Every rank draws the same global batch and trains on its rows of it; its gradient,
      // weighted by its share, summed over ranks is the gradient of the whole batch.
      const auto shard = shardOf(sampler.next(), world);
      const auto ids = dataset.train.index_select(0, shard.rows);  // [b, T]
      optimizer.zero_grad();
      const double localLoss = distillLayerByLayer(*model, ids, capture, teacherOptions(), config.loss, config.outputMse,
                                                   LayerPass::Backward, state.step == config.debugNanAtStep);
      const double lossValue = world.reduceGradients(params, shard.share, {localLoss * shard.share}).front();
      if (!std::isfinite(lossValue)) {
        restoreAdapters(*model, lastGood);
        result.status = JobStatus::Failed;
        result.message = "the loss became " + std::string(std::isnan(lossValue) ? "NaN" : "infinite") + " at step " +
                         std::to_string(state.step + 1) + "; kept the feature maps of step " + std::to_string(state.step) +
                         " (try a lower lr, or hedgehog_softmax)";
        break;
      }
      optimizer.step();
      ++state.step;
      lastGood = cloneAdapters(*model);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (writer) writer->appendScalars(state.step, {{"loss", lossValue}, {"lr", config.lr}, {"step_seconds", seconds}});
      observer.scalars(state.step, {{"loss", lossValue}, {"lr", config.lr}});
      observer.progress(state.step, config.steps, "distilling");
      const bool evalNow = state.step % config.evalEvery == 0 || state.step == config.steps;
      if (evalNow) {
        const double val = validationLoss();
        const double kl = main ? probe(state.step, state.step % config.snapshotEvery == 0 || state.step == config.steps) : 0.0;
        if (writer) {
          writer->appendScalars(state.step, {{"val_loss", val}, {"kl_mean", kl}});
          writer->appendWeights(state.step, adapterFloats(*model));
        }
        observer.scalars(state.step, main ? std::map<std::string, double>{{"val_loss", val}, {"kl_mean", kl}}
                                          : std::map<std::string, double>{{"val_loss", val}});
        log("step " + std::to_string(state.step) + ": loss " + std::to_string(lossValue) + ", val_loss " +
            std::to_string(val) + ", mean KL " + std::to_string(kl));
        if (val < state.bestLoss - 1e-6) {
          state.bestLoss = val;
          state.bestStep = state.step;
          state.evalsWithoutGain = 0;
          best = cloneAdapters(*model);
        } else {
          ++state.evalsWithoutGain;
        }
        // Rows first: the run file then always holds every step up to the checkpoint's, which
        // a resume continues from (its continuation file starts at the next step).
        if (writer) writer->flush();
        saveCheckpoint();
        if (config.patience > 0 && state.evalsWithoutGain >= config.patience) {
          log("early stop: no validation gain in " + std::to_string(config.patience) + " evaluations");
          break;
        }
      }
    }
  } catch (const JobCancelled&) {
    result.status = JobStatus::Cancelled;
    result.message = "cancelled at step " + std::to_string(state.step);
  } catch (const std::runtime_error& e) {
    // With several processes: a lost or timed-out peer ends the exchange; this rank keeps its
    // last step's weights and (rank 0) closes the run file as failed. Alone: not expected here.
    if (!world.distributed()) throw;
    result.status = JobStatus::Failed;
    result.message = e.what();
  }
  // Keep the best feature maps (by validation loss) unless the job failed before any gain.
  if (result.status != JobStatus::Failed || state.bestStep > 0) restoreAdapters(*model, best);
  result.steps = state.step;
  result.bestStep = state.bestStep;
  result.bestValidationLoss = state.bestLoss;
  result.initialKl = state.initialKl;
  if (!main) {  // the other ranks are done: rank 0 evaluates and writes the results
    result.runFile.clear();
    result.adaptersFile.clear();
    result.message = std::string(toString(result.status)) + " on rank " + std::to_string(world.rank());
    result.seconds = secondsSince(started);
    return result;
  }
  try {
    if (result.status == JobStatus::Completed) {
      ProbeRequest request;
      result.finalKl = probeAttention(*model, dataset.validation.narrow(0, 0, std::min<int64_t>(probeRows, dataset.validation.size(0))),
                                      {}, request).meanKl;
    }
    writer->flush();
    saveCheckpoint();
    writer->setFinal(result.adaptersFile, state.step);
  } catch (const std::exception& e) {
    if (result.status == JobStatus::Completed) result.status = JobStatus::Failed, result.message = e.what();
  }
  if (result.message.empty())
    result.message = "best validation loss " + std::to_string(state.bestLoss) + " at step " + std::to_string(state.bestStep) +
                     "; mean KL " + std::to_string(result.initialKl) + " -> " + std::to_string(result.finalKl);
  finishRun(*writer, observer, result.status, result.message, state.step);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs

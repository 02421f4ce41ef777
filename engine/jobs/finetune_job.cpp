#include "engine/jobs/finetune_job.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "engine/core/runtime.h"
#include "engine/data/classification_data.h"
#include "engine/data/data_paths.h"
#include "engine/distributed/communicator.h"
#include "engine/jobs/data_parallel.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_support.h"
#include "engine/models/lora.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_writer.h"
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

}  // namespace

FinetuneResult runFinetune(const FinetuneConfig& config, JobObserver& observer, dist::Communicator* communicator) {
  const auto started = std::chrono::steady_clock::now();
  hh::initRuntime();
  torch::manual_seed(config.seed);
  dist::Communicator& world = dist::Communicator::orAlone(communicator);
  const bool main = world.isMain();  // rank 0 writes the run file, the checkpoint and the model
  if (config.runDir.empty()) throw std::invalid_argument("finetune: run_dir is empty");
  requireRowPerRank("finetune", config.batchSize, world);
  if (config.modelDir.empty()) throw std::invalid_argument("finetune: model is empty");
  fs::create_directories(config.runDir);
  FinetuneResult result;
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  result.modelDir = config.outputDir.empty() ? (fs::path(config.runDir) / "model").string() : config.outputDir;
  const bool classification = config.task == "classification";

  // ---- tokenizer, data, model (errors here are configuration errors: thrown) ----
  const auto tokenizer = tok::loadTokenizer(config.modelDir);
  data::LmDataset lmData;
  data::ClassificationDataset classData;
  models::ModelPtr model;
  if (classification) {
    classData = loadClassificationData(config.classification, *tokenizer);
    const int64_t labels = std::max<int64_t>(static_cast<int64_t>(classData.labelNames.size()),
                                             classData.train.labels.max().item<int64_t>() + 1);
    model = models::loadModelForClassification(config.modelDir, std::max<int64_t>(labels, 2));
  } else {
    lmData = loadLmData(config.data, *tokenizer);
    model = models::loadModel(config.modelDir);
    if (model->config().head != models::HeadKind::CausalLM || !model->config().causal)
      throw std::invalid_argument("finetune: task \"lm\" needs a causal LM (gpt2 or llama), not " + model->config().describe());
  }
  if (!config.adapters.empty()) models::loadAdaptersFile(*model, config.adapters);
  model->train();

  std::unique_ptr<models::LoraAdapters> lora;
  std::vector<torch::Tensor> params;
  model->freezeAllBut(true);  // adapters (feature maps, gates) train in both modes
  if (config.mode == "full") {
    std::set<const void*> adapters;
    for (const auto& [name, t] : model->adapterTensors()) adapters.insert(t.unsafeGetTensorImpl());
    for (auto& p : model->parameters())
      if (!adapters.count(p.unsafeGetTensorImpl())) p.set_requires_grad(true);
  } else {
    models::LoraOptions options;
    options.rank = config.loraRank;
    options.alpha = config.loraAlpha;
    options.seed = config.seed;
    lora = std::make_unique<models::LoraAdapters>(*model, options);
    for (auto& item : model->named_parameters(true))
      if (isClassificationHead(item.key())) item.value().set_requires_grad(true);
  }
  for (auto& p : model->parameters())
    if (p.requires_grad()) params.push_back(p);
  if (lora)
    for (const auto& p : lora->parameters()) params.push_back(p);
  for (const auto& p : params) result.trainableParameters += p.numel();

  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(config.lr).weight_decay(config.weightDecay));
  // Trained values (LoRA A/B, heads, or every weight), optimizer state and counters in one file
  // (training_checkpoint.h): resume rebuilds the same model and LoRA, then loads it.
  const auto checkpointFile = (fs::path(config.runDir) / "checkpoint.safetensors").string();
  int64_t step = 0;
  double bestLoss = std::numeric_limits<double>::infinity();
  int64_t evalsWithoutGain = 0;
  if (config.resume) refuseLegacyCheckpoint(config.runDir, checkpointFile);
  const bool resuming = config.resume && fs::exists(checkpointFile);
  if (resuming) {
    const auto j = loadTrainingCheckpoint(checkpointFile, optimizer);
    step = j.at("step");
    result.bestStep = j.at("best_step");
    bestLoss = counterNumber(j, "best_loss", std::numeric_limits<double>::infinity());
    evalsWithoutGain = j.at("evals_without_gain");
    result.initialValidationLoss = counterNumber(j, "initial_val_loss", std::numeric_limits<double>::quiet_NaN());
    result.initialMetric = counterNumber(j, "initial_metric", std::numeric_limits<double>::quiet_NaN());
    result.finalValidationLoss = counterNumber(j, "val_loss", std::numeric_limits<double>::quiet_NaN());
    result.finalMetric = counterNumber(j, "metric", std::numeric_limits<double>::quiet_NaN());
  }
  startTogether(world, params, step);
  auto saveCheckpoint = [&]() {
    if (!main) return;
    saveTrainingCheckpoint(checkpointFile, optimizer,
                           {{"step", step}, {"best_step", result.bestStep}, {"best_loss", bestLoss},
                            {"evals_without_gain", evalsWithoutGain}, {"initial_val_loss", result.initialValidationLoss},
                            {"initial_metric", result.initialMetric}, {"val_loss", result.finalValidationLoss},
                            {"metric", result.finalMetric}});
  };

  // ---- run file: everything declared before SWMR starts ----
  const std::string metric = classification ? "accuracy" : "perplexity";
  runs::RunHeader header;
  header.runId = makeRunId("finetune");
  header.kind = "finetune";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceName(world);
  header.layout.scalars = {{"loss", "nats"}, {"lr"}, {"grad_norm"}, {"val_loss", "nats"}, {metric}};
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  if (resuming && fs::exists(result.runFile))  // keep the old file: write a continuation beside it
    result.runFile = (fs::path(config.runDir) / ("run-resumed-" + std::to_string(step) + ".h5")).string();
  std::optional<runs::RunWriter> writer;
  if (main) {
    writer = runs::RunWriter::create(result.runFile, header, writerOptions);
    observer.started(result.runFile, config.steps);
  }
  auto log = [&](const std::string& line) {
    if (writer) writer->log(line, step);
    observer.log(line);
  };
  const int64_t trainRows = classification ? classData.train.ids.size(0) : lmData.train.size(0);
  const int64_t validationRows = classification ? classData.validation.ids.size(0) : lmData.validation.size(0);
  log("finetune " + model->config().describe() + " | " + config.mode + " | task " + config.task + " | " +
      std::to_string(result.trainableParameters) + " of " + std::to_string(model->parameterCount()) +
      " parameters train | train " + std::to_string(trainRows) + " rows, validation " + std::to_string(validationRows) +
      (resuming ? " | resumed at step " + std::to_string(step) : "") +
      dataParallelNote(world, config.batchSize, "rows"));

  // The task loss of one batch (training mode; this rank's rows) and the held-out evaluation:
  // {val_loss, metric}, the same on every rank (each evaluates its rows of every batch).
  auto batchLoss = [&](const torch::Tensor& rows) {
    if (lora) lora->apply();
    if (!classification) {
      const auto ids = lmData.train.index_select(0, rows);  // [B,T]
      return nextTokenLoss(model->forward(ids).logits, ids);
    }
    models::ForwardOptions options;
    options.attentionMask = classData.train.mask.index_select(0, rows);  // [B,T]
    const auto logits = model->forward(classData.train.ids.index_select(0, rows), options).logits;  // [B,labels]
    return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), classData.train.labels.index_select(0, rows));
  };
  auto evaluate = [&]() -> std::pair<double, double> {
    torch::NoGradGuard noGrad;
    if (lora) lora->apply();
    if (!classification) {
      const double loss = heldOutLmLoss(*model, lmData.validation, config.batchSize, config.evalBatches, observer, &world);
      return {loss, std::exp(loss)};
    }
    model->eval();
    std::vector<double> totals{0.0, 0.0, 0.0};  // loss sum, correct, count
    int64_t batches = 0;
    const auto& v = classData.validation;
    const int64_t n = v.ids.size(0);
    for (int64_t start = 0; start < n && (config.evalBatches <= 0 || batches < config.evalBatches); start += config.batchSize, ++batches) {
      if (!world.distributed()) throwIfCancelled(observer);  // a lone rank must not leave a collective
      const auto [first, last] = dist::shardRange(std::min(config.batchSize, n - start), world.rank(), world.size());
      const int64_t b = last - first;
      if (b == 0) continue;
      models::ForwardOptions options;
      options.attentionMask = v.mask.narrow(0, start + first, b);
      const auto logits = model->forward(v.ids.narrow(0, start + first, b), options).logits.to(torch::kFloat);  // [b,labels]
      const auto labels = v.labels.narrow(0, start + first, b);
      totals[0] += torch::nn::functional::cross_entropy(logits, labels).item<double>() * double(b);
      totals[1] += double(logits.argmax(-1).eq(labels).sum().item<int64_t>());
      totals[2] += double(b);
    }
    model->train();
    totals = world.sum(totals);
    return {totals[0] / std::max(totals[2], 1.0), totals[1] / std::max(totals[2], 1.0)};
  };

  BatchSampler sampler(trainRows, config.batchSize, config.seed);
  sampler.skip(step);
  try {
    if (!resuming) {
      observer.progress(0, config.steps, "evaluating the starting model");
      std::tie(result.initialValidationLoss, result.initialMetric) = evaluate();
      if (writer) writer->appendScalars(0, {{"val_loss", result.initialValidationLoss}, {metric, result.initialMetric}});
      observer.scalars(0, {{"val_loss", result.initialValidationLoss}, {metric, result.initialMetric}});
      log("step 0: val_loss " + std::to_string(result.initialValidationLoss) + ", " + metric + " " +
          std::to_string(result.initialMetric));
      bestLoss = result.initialValidationLoss;
      result.finalValidationLoss = result.initialValidationLoss;
      result.finalMetric = result.initialMetric;
    }
    while (step < config.steps) {
      if (world.any(observer.cancelled())) throw JobCancelled();  // every rank stops at the same step
      const double lr = scheduledLr(config.lr, step, config.warmupSteps, config.steps, config.minLrRatio);
      setLr(optimizer, lr);
      optimizer.zero_grad();
      // Every rank draws the same global batch and trains on its rows; its gradient, weighted by
      // its share, summed over ranks is the gradient of the whole batch (then clipped).
      const auto shard = shardOf(sampler.next(), world);
      auto loss = batchLoss(shard.rows);
      if (step == config.debugNanAtStep) loss = loss * std::numeric_limits<float>::quiet_NaN();
      const double localLoss = loss.item<double>();
      if (std::isfinite(localLoss)) loss.backward();
      const double lossValue = world.reduceGradients(params, shard.share, {localLoss * shard.share}).front();
      double gradNorm = 0;
      if (std::isfinite(lossValue)) gradNorm = clipGradients(params, config.gradClip);
      if (!std::isfinite(lossValue) || !std::isfinite(gradNorm)) {
        result.status = JobStatus::Failed;
        result.message = std::string(!std::isfinite(lossValue) ? "the loss" : "the gradient norm") + " became " +
                         (std::isnan(std::isfinite(lossValue) ? gradNorm : lossValue) ? "NaN" : "infinite") + " at step " +
                         std::to_string(step + 1) + "; kept the weights of step " + std::to_string(step) + " (try a lower lr)";
        break;
      }
      optimizer.step();
      ++step;
      if (writer) writer->appendScalars(step, {{"loss", lossValue}, {"lr", lr}, {"grad_norm", gradNorm}});
      observer.scalars(step, {{"loss", lossValue}, {"lr", lr}});
      observer.progress(step, config.steps, "finetuning");
      if (step % config.evalEvery == 0 || step == config.steps) {
        const auto [val, m] = evaluate();
        result.finalValidationLoss = val;
        result.finalMetric = m;
        if (writer) writer->appendScalars(step, {{"val_loss", val}, {metric, m}});
        observer.scalars(step, {{"val_loss", val}, {metric, m}});
        log("step " + std::to_string(step) + ": loss " + std::to_string(lossValue) + ", val_loss " + std::to_string(val) +
            ", " + metric + " " + std::to_string(m));
        const bool gained = val < bestLoss - 1e-6;
        if (gained) {
          bestLoss = val;
          result.bestStep = step;
          evalsWithoutGain = 0;
        } else {
          ++evalsWithoutGain;
        }
        // Rows first: the run file then always holds every step up to the checkpoint's, which
        // a resume continues from (its continuation file starts at the next step).
        if (writer) writer->flush();
        saveCheckpoint();
        if (!gained && config.patience > 0 && evalsWithoutGain >= config.patience) {
          log("early stop: no validation gain in " + std::to_string(config.patience) + " evaluations");
          break;
        }
      }
    }
  } catch (const JobCancelled&) {
    result.status = JobStatus::Cancelled;
    result.message = "cancelled at step " + std::to_string(step);
  } catch (const std::runtime_error& e) {
    // With several processes: a lost or timed-out peer ends the exchange; this rank keeps its
    // last step's weights and (rank 0) closes the run file as failed. Alone: not expected here.
    if (!world.distributed()) throw;
    result.status = JobStatus::Failed;
    result.message = e.what();
  }
  result.steps = step;
  result.bestValidationLoss = bestLoss;
  if (!main) {  // the other ranks are done: rank 0 saves the model and closes the run file
    result.runFile.clear();
    result.modelDir.clear();
    result.message = std::string(toString(result.status)) + " on rank " + std::to_string(world.rank());
    result.seconds = secondsSince(started);
    return result;
  }
  // Save the last good weights as a plain model (LoRA merged in); the checkpoint before the merge
  // (it holds the unmerged LoRA factors that resume continues from).
  try {
    writer->flush();
    saveCheckpoint();
    if (lora) lora->merge();
    model->eval();
    models::saveModel(*model, result.modelDir, config.modelDir);
    writer->setFinal(result.modelDir, step);
  } catch (const std::exception& e) {
    if (result.status == JobStatus::Completed) result.status = JobStatus::Failed, result.message = e.what();
  }
  if (result.message.empty())
    result.message = "validation loss " + std::to_string(result.initialValidationLoss) + " -> " +
                     std::to_string(result.finalValidationLoss) + ", " + metric + " " + std::to_string(result.initialMetric) +
                     " -> " + std::to_string(result.finalMetric);
  finishRun(*writer, observer, result.status, result.message, step);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs

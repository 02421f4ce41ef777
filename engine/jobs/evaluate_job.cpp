#include "engine/jobs/evaluate_job.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/core/runtime.h"
#include "engine/data/classification_data.h"
#include "engine/data/data_paths.h"
#include "engine/jobs/attention_probe.h"
#include "engine/jobs/job_support.h"
#include "engine/models/model_io.h"
#include "engine/runs/run_writer.h"
#include "engine/tokenizers/tokenizer.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Held-out rows: ids [N, T], mask [N, T] (undefined for LM), labels [N] (classification).
struct HeldOut {
  torch::Tensor ids, mask, labels;
  int64_t rows() const { return ids.size(0); }
  HeldOut to(c10::Device device) const {
    HeldOut out;
    out.ids = ids.to(device);
    if (mask.defined()) out.mask = mask.to(device);
    if (labels.defined()) out.labels = labels.to(device);
    return out;
  }
  HeldOut slice(int64_t start, int64_t count) const {
    HeldOut out;
    out.ids = ids.narrow(0, start, count);
    if (mask.defined()) out.mask = mask.narrow(0, start, count);
    if (labels.defined()) out.labels = labels.narrow(0, start, count);
    return out;
  }
};

HeldOut loadHeldOut(const EvaluateConfig& c, const tok::Tokenizer& tokenizer) {
  HeldOut out;
  if (c.task == "lm") {
    out.ids = loadLmData(c.data, tokenizer, /*needTraining=*/false).validation;
  } else {
    if (c.data.corpus == "brown")
      throw std::invalid_argument("evaluate: task \"classification\" needs a labelled corpus (\"spamassassin\" or a .tsv/.jsonl file), not \"brown\"");
    const auto corpus = c.data.corpus == "spamassassin" ? data::readSpamAssassin(data::spamAssassinDir())
                                                        : data::readClassificationFile(c.data.corpus);
    data::ClassificationOptions options;
    options.sequenceLength = c.data.sequenceLength;
    options.validationFraction = c.data.validationFraction;
    options.seed = c.data.seed;
    auto dataset = data::buildClassificationDataset(corpus, tokenizer, options);
    out.ids = dataset.validation.ids;
    out.mask = dataset.validation.mask;
    out.labels = dataset.validation.labels;
    if (c.data.maxValidationSequences > 0 && out.rows() > c.data.maxValidationSequences)
      out = out.slice(0, c.data.maxValidationSequences);
  }
  if (out.rows() == 0)
    throw std::invalid_argument("evaluate: corpus \"" + c.data.corpus + "\" gives no held-out sequence (raise validation_fraction)");
  if (c.maxSequences > 0 && out.rows() > c.maxSequences) out = out.slice(0, c.maxSequences);
  return out;
}

// The converted model: a converted folder, an adapters file on the teacher, or the teacher with
// `featureMap` at its initialisation.
models::ModelPtr loadConverted(const EvaluateConfig& c, const models::LoadOptions& load) {
  std::error_code ec;
  models::ModelPtr model;
  if (c.converted.empty()) {
    model = models::loadModel(c.modelDir, load);
    attn::LinearAttentionConfig linear;
    linear.featureMap.kind = attn::parseFeatureMapKind(c.featureMap);
    linear.featureMap.seed = c.seed;
    const int64_t L = model->layerCount();
    model->setAttentionPlan(c.layers.empty() ? models::AttentionPlan::uniform(L, linear)
                                             : models::AttentionPlan::hybrid(L, c.layers, linear));
  } else if (fs::is_directory(c.converted, ec)) {
    model = models::loadModel(c.converted, load);
  } else if (fs::is_regular_file(c.converted, ec)) {
    model = models::loadModel(c.modelDir, load);
    models::loadAdaptersFile(*model, c.converted);
  } else {
    throw std::invalid_argument("evaluate: converted model \"" + c.converted + "\" is neither a folder nor an adapters file");
  }
  if (!model->config().plan.anyLinear())
    throw std::invalid_argument("evaluate: the converted model \"" + c.converted + "\" has no linear-attention layer");
  return model;
}

void checkCancel(JobObserver& observer) {
  if (observer.cancelled()) throw JobCancelled();
}

// Mean of table entries over `layers` (all heads); NaN entries propagate.
double meanOver(const HeadTable& table, const std::vector<int64_t>& layers) {
  double sum = 0;
  int64_t count = 0;
  for (const auto l : layers)
    for (int h = 0; h < table.heads; ++h) sum += table.values[static_cast<size_t>(l * table.heads + h)], ++count;
  return count > 0 ? sum / double(count) : kNan;
}

}  // namespace

EvaluateResult runEvaluate(const EvaluateConfig& config, JobObserver& observer) {
  const auto started = std::chrono::steady_clock::now();
  hh::initRuntime();
  torch::manual_seed(config.seed);
  if (config.runDir.empty()) throw std::invalid_argument("evaluate: run_dir is empty");
  if (config.modelDir.empty()) throw std::invalid_argument("evaluate: no teacher model folder (\"model\")");
  if (config.task != "lm" && config.task != "classification")
    throw std::invalid_argument("evaluate: task must be \"lm\" or \"classification\"");
  if (config.batchSize <= 0) throw std::invalid_argument("evaluate: batch_size must be positive");
  const auto mapNames = evaluateFeatureMapNames(config);
  const bool lm = config.task == "lm";

  // ---- models, data (errors here are configuration errors: thrown) ----
  const auto load = loadOptions(config.device, config.dtype);
  auto teacher = models::loadModel(config.modelDir, load);
  if (teacher->config().plan.anyLinear())
    throw std::invalid_argument("evaluate: the teacher \"" + config.modelDir + "\" already has linear layers; give the softmax original");
  auto converted = loadConverted(config, load);
  const auto& mc = teacher->config();
  const int64_t L = mc.layers, H = mc.heads;
  if (converted->config().layers != L || converted->config().heads != H || converted->config().vocabSize != mc.vocabSize)
    throw std::invalid_argument("evaluate: the converted model's shape (" + converted->config().describe() +
                                ") differs from the teacher's (" + mc.describe() + ")");
  const bool classifier = mc.head == models::HeadKind::SequenceClassification;
  if (lm && mc.head != models::HeadKind::CausalLM)
    throw std::invalid_argument("evaluate: task \"lm\" needs a causal LM head; " + config.modelDir + " has " + models::toString(mc.head));
  if (!lm && !classifier)
    throw std::invalid_argument("evaluate: task \"classification\" needs a sequence-classification head (num_labels); " +
                                config.modelDir + " has " + models::toString(mc.head));
  std::vector<int64_t> tableLayers = config.layers;
  if (tableLayers.empty())
    for (int64_t l = 0; l < L; ++l)
      if (converted->config().plan.layers[static_cast<size_t>(l)].linear) tableLayers.push_back(l);
  for (const auto l : tableLayers)
    if (l < 0 || l >= L) throw std::invalid_argument("evaluate: layer " + std::to_string(l) + " outside [0, " + std::to_string(L) + ")");
  const auto tokenizer = tok::loadTokenizer(config.modelDir);
  const auto heldOut = loadHeldOut(config, *tokenizer).to(load.device);
  const int64_t tableRows = config.tableSequences > 0 ? std::min(config.tableSequences, heldOut.rows()) : heldOut.rows();

  EvaluateResult result;
  result.device = deviceLabelOf(*teacher);
  result.task = config.task;
  result.sequences = heldOut.rows();
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  fs::create_directories(config.runDir);

  // ---- run file: everything declared before SWMR starts ----
  runs::RunHeader header;
  header.runId = makeRunId("evaluate");
  header.kind = "evaluate";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceLabelOf(*teacher);
  auto& layout = header.layout;
  if (lm)
    layout.scalars = {{"nll_original", "nats"}, {"nll_converted", "nats"}, {"perplexity_original"}, {"perplexity_converted"},
                      {"perplexity_ratio"}};
  else
    layout.scalars = {{"accuracy_original"}, {"accuracy_converted"}};
  layout.scalars.push_back({"entropy_softmax_mean", "nats"});
  layout.layers = static_cast<int>(L);
  layout.heads = static_cast<int>(H);
  layout.tables.push_back({"entropy_softmax", "nats"});
  for (const auto& name : mapNames) {
    layout.scalars.push_back({"kl_mean_" + name, "nats"});
    layout.scalars.push_back({"entropy_mean_" + name, "nats"});
    layout.scalars.push_back({"monotonicity_mean_" + name, "rho"});
    layout.tables.push_back({"kl_" + name, "nats"});
    layout.tables.push_back({"entropy_" + name, "nats"});
    layout.tables.push_back({"monotonicity_" + name, "rho"});
  }
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  auto writer = runs::RunWriter::create(result.runFile, header, writerOptions);

  const int64_t batches = (heldOut.rows() + config.batchSize - 1) / config.batchSize;
  const int64_t tableBatches = (tableRows + config.batchSize - 1) / config.batchSize;
  // Every row's table batches, and the teacher's own when no row measures the teacher.
  const bool teacherMeasured = std::any_of(mapNames.begin(), mapNames.end(), [](const auto& n) { return n != "trained"; });
  const int64_t total = 2 * batches + (static_cast<int64_t>(mapNames.size()) + (teacherMeasured ? 0 : 1)) * tableBatches;
  int64_t done = 0;
  observer.started(result.runFile, total);
  auto log = [&](const std::string& line) {
    writer.log(line);
    observer.log(line);
  };
  log("evaluate " + mc.describe() + " | converted: " + (config.converted.empty() ? config.featureMap + " (untrained)" : config.converted) +
      " | " + config.task + " on " + std::to_string(heldOut.rows()) + " held-out sequences of " + std::to_string(heldOut.ids.size(1)) +
      " tokens, attention table on " + std::to_string(tableRows));

  // Task quality of one model: mean next-token NLL (lm) or accuracy (classification).
  auto taskQuality = [&](models::TransformerModel& model, const std::string& phase) {
    at::NoGradGuard noGrad;
    double sum = 0;
    int64_t count = 0;
    for (int64_t start = 0; start < heldOut.rows(); start += config.batchSize) {
      checkCancel(observer);
      const auto batch = heldOut.slice(start, std::min(config.batchSize, heldOut.rows() - start));
      models::ForwardOptions options;
      options.attentionMask = batch.mask;
      const auto logits = model.forward(batch.ids, options).logits;
      if (lm) {  // logits [B, T, V]: position t predicts token t + 1 (log-softmax in fp32, sum in fp64)
        const int64_t T = batch.ids.size(1);
        const auto logp = torch::log_softmax(logits.narrow(1, 0, T - 1).to(torch::kFloat), -1);
        const auto targets = batch.ids.narrow(1, 1, T - 1).unsqueeze(-1);  // [B, T-1, 1]
        sum += -logp.gather(-1, targets).to(torch::kDouble).sum().item<double>();
        count += batch.ids.size(0) * (T - 1);
      } else {  // logits [B, K]
        sum += logits.argmax(-1).eq(batch.labels).sum().item<double>();
        count += batch.ids.size(0);
      }
      observer.progress(++done, total, phase);
    }
    result.predictions = count;
    return sum / double(std::max<int64_t>(count, 1));
  };

  // Per-head tables of one model's linear attention against softmax, averaged over the table's
  // batches (weighted by their sequence count; NaN entries propagate).
  auto measure = [&](models::TransformerModel& model, const std::string& name) {
    HeadMeasures sums(static_cast<int>(model.config().layers), static_cast<int>(model.config().heads));
    for (auto* t : sums.tables()) std::fill(t->values.begin(), t->values.end(), 0.0);
    for (int64_t start = 0; start < tableRows; start += config.batchSize) {
      checkCancel(observer);
      const int64_t n = std::min(config.batchSize, tableRows - start);
      const auto batch = heldOut.slice(start, n);
      const auto probed = probeAttention(model, batch.ids, batch.mask, ProbeRequest{}).heads;
      const auto from = probed.tables();
      auto into = sums.tables();
      for (size_t i = 0; i < into.size(); ++i)
        for (size_t k = 0; k < into[i]->values.size(); ++k) into[i]->values[k] += double(n) * from[i]->values[k];
      observer.progress(++done, total, "attention table: " + name);
    }
    for (auto* t : sums.tables())
      for (auto& v : t->values) v /= double(tableRows);
    return sums;
  };

  try {
    const double original = taskQuality(*teacher, "original model");
    const double convertedQuality = taskQuality(*converted, "converted model");
    std::map<std::string, double> scalars;
    if (lm) {
      result.nllOriginal = original;
      result.nllConverted = convertedQuality;
      result.perplexityOriginal = std::exp(original);
      result.perplexityConverted = std::exp(convertedQuality);
      scalars = {{"nll_original", original}, {"nll_converted", convertedQuality},
                 {"perplexity_original", result.perplexityOriginal}, {"perplexity_converted", result.perplexityConverted},
                 {"perplexity_ratio", result.perplexityConverted / result.perplexityOriginal}};
      log("perplexity: original " + std::to_string(result.perplexityOriginal) + ", converted " +
          std::to_string(result.perplexityConverted) + " over " + std::to_string(result.predictions) + " predictions");
    } else {
      result.accuracyOriginal = original;
      result.accuracyConverted = convertedQuality;
      scalars = {{"accuracy_original", original}, {"accuracy_converted", convertedQuality}};
      log("accuracy: original " + std::to_string(original) + ", converted " + std::to_string(convertedQuality) + " over " +
          std::to_string(result.predictions) + " examples");
    }
    writer.appendScalars(0, scalars);
    observer.scalars(0, scalars);

    // The original teacher's softmax entropy (a "trained" row measures the converted model, whose
    // q and k full finetuning has changed): from the first row measured on the teacher, else from
    // the teacher alone after the rows.
    auto recordSoftmaxEntropy = [&](const HeadTable& entropy) {
      result.softmaxEntropyTable = entropy;
      result.softmaxEntropy = meanOver(entropy, tableLayers);
      writer.appendTable(0, "entropy_softmax", entropy.values);
      writer.appendScalar(0, "entropy_softmax_mean", result.softmaxEntropy);
    };
    for (const auto& name : mapNames) {
      HeadMeasures tables;
      if (name == "trained") {
        tables = measure(*converted, name);
      } else {
        attn::LinearAttentionConfig linear;
        const auto spec = attn::parseFeatureMapSpec(name);  // a kind, or exp_t=<t>
        linear.featureMap.kind = spec.kind;
        linear.featureMap.expT = spec.expT;
        linear.featureMap.seed = config.seed;
        teacher->setAttentionPlan(models::AttentionPlan::hybrid(L, tableLayers, linear));
        tables = measure(*teacher, name);
        teacher->setAttentionPlan(models::AttentionPlan{});
      }
      if (!result.softmaxEntropyTable.heads && name != "trained") recordSoftmaxEntropy(tables.entropySoftmax);
      FeatureMapEvaluation row;
      row.name = name;
      row.klTable = tables.kl;
      row.entropyTable = tables.entropyLinear;
      row.monotonicityTable = tables.monotonicity;
      row.klTable.name = "kl_" + name;
      row.entropyTable.name = "entropy_" + name;
      row.monotonicityTable.name = "monotonicity_" + name;
      row.kl = meanOver(row.klTable, tableLayers);
      row.entropy = meanOver(row.entropyTable, tableLayers);
      row.monotonicity = meanOver(row.monotonicityTable, tableLayers);
      const std::map<std::string, double> rowScalars{
          {"kl_mean_" + name, row.kl}, {"entropy_mean_" + name, row.entropy}, {"monotonicity_mean_" + name, row.monotonicity}};
      for (const auto* t : {&row.klTable, &row.entropyTable, &row.monotonicityTable}) writer.appendTable(0, t->name, t->values);
      writer.appendScalars(0, rowScalars);
      observer.scalars(0, rowScalars);
      log(name + ": KL " + std::to_string(row.kl) + ", entropy " + std::to_string(row.entropy) + ", monotonicity " +
          std::to_string(row.monotonicity));
      result.featureMaps.push_back(std::move(row));
      writer.flush();
    }
    if (!result.softmaxEntropyTable.heads) recordSoftmaxEntropy(measure(*teacher, "softmax").entropySoftmax);
    result.status = JobStatus::Completed;
  } catch (const JobCancelled&) {
    result.status = JobStatus::Cancelled;
    result.message = "cancelled after " + std::to_string(done) + " of " + std::to_string(total) + " batches";
  } catch (const std::exception& e) {
    result.status = JobStatus::Failed;
    result.message = e.what();
  }
  if (result.message.empty()) {
    result.message = lm ? "perplexity " + std::to_string(result.perplexityOriginal) + " -> " + std::to_string(result.perplexityConverted)
                        : "accuracy " + std::to_string(result.accuracyOriginal) + " -> " + std::to_string(result.accuracyConverted);
    result.message += "; " + std::to_string(result.featureMaps.size()) + " feature maps measured";
  }
  finishRun(writer, observer, result.status, result.message, -1);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs

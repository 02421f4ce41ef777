#include "engine/jobs/evaluate_job.h"
#include "engine/core/error_text.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>

#include "engine/attention/initial_values.h"
#include "engine/core/runtime.h"
#include "engine/data/classification_data.h"
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
    const auto corpus = data::readClassificationCorpus(c.data.corpus);
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

// Mean of table entries over `layers` (all heads); NaN entries propagate.
double meanOver(const HeadTable& table, const std::vector<int64_t>& layers) {
  double sum = 0;
  int64_t count = 0;
  for (const auto l : layers)
    for (int h = 0; h < table.heads; ++h) sum += table.values[static_cast<size_t>(l * table.heads + h)], ++count;
  return count > 0 ? sum / double(count) : kNan;
}

// Per-head means over batches. A head's value is a mean over query rows, and batches of padded
// texts hold different numbers of them, so each batch's value counts by its real query rows
// (exact for KL and entropy, which use every real row; monotonicity skips rows with fewer than
// two keys or tied scores, so its weights are the rows it could use at most). A NaN entry of one
// batch (a head with no usable row there) is left out of that entry's mean instead of turning it
// NaN; an entry no batch measured (a softmax layer's linear columns) stays NaN.
class RowWeightedMeans {
 public:
  RowWeightedMeans(int layers, int heads) : sums_(layers, heads) {
    for (auto* t : sums_.tables()) {
      std::fill(t->values.begin(), t->values.end(), 0.0);
      weights_.emplace_back(t->values.size(), 0.0);
    }
  }

  void add(const HeadMeasures& batch, double rows) {
    const auto target = sums_.tables();
    const auto source = batch.tables();
    for (size_t i = 0; i < target.size(); ++i)
      for (size_t k = 0; k < target[i]->values.size(); ++k)
        if (std::isfinite(source[i]->values[k])) {
          target[i]->values[k] += rows * source[i]->values[k];
          weights_[i][k] += rows;
        }
  }

  HeadMeasures result() const {
    HeadMeasures out = sums_;
    const auto tables = out.tables();
    for (size_t i = 0; i < tables.size(); ++i)
      for (size_t k = 0; k < tables[i]->values.size(); ++k)
        tables[i]->values[k] = weights_[i][k] > 0 ? tables[i]->values[k] / weights_[i][k] : kNan;
    return out;
  }

 private:
  HeadMeasures sums_;
  std::vector<std::vector<double>> weights_;  // per table, per entry: the rows summed in
};

void checkConfig(const EvaluateConfig& config) {
  if (config.runDir.empty()) throw std::invalid_argument("evaluate: run_dir is empty");
  if (config.modelDir.empty()) throw std::invalid_argument("evaluate: no teacher model folder (\"model\")");
  if (config.task != "lm" && config.task != "classification")
    throw std::invalid_argument("evaluate: task must be \"lm\" or \"classification\"");
  if (config.batchSize <= 0) throw std::invalid_argument("evaluate: batch_size must be positive");
}

// The softmax teacher, the converted model and the layers the attention tables cover.
struct Models {
  models::ModelPtr teacher, converted;
  std::vector<int64_t> tableLayers;    // config.layers, or every converted layer
  std::vector<int64_t> trainedLayers;  // those of them the converted model makes linear ("trained")
};

// Errors here are configuration errors: thrown before anything starts.
Models loadModels(const EvaluateConfig& config, const models::LoadOptions& load) {
  Models m;
  m.teacher = models::loadModel(config.modelDir, load);
  if (m.teacher->config().plan.anyLinear())
    throw std::invalid_argument("evaluate: the teacher \"" + config.modelDir + "\" already has linear layers; give the softmax original");
  m.converted = loadConverted(config, load);
  const auto& mc = m.teacher->config();
  const auto& cc = m.converted->config();
  if (cc.layers != mc.layers || cc.heads != mc.heads || cc.vocabSize != mc.vocabSize)
    throw std::invalid_argument("evaluate: the converted model's shape (" + cc.describe() + ") differs from the teacher's (" +
                                mc.describe() + ")");
  if (config.task == "lm" && mc.head != models::HeadKind::CausalLM)
    throw std::invalid_argument("evaluate: task \"lm\" needs a causal LM head; " + config.modelDir + " has " + models::toString(mc.head));
  if (config.task != "lm" && mc.head != models::HeadKind::SequenceClassification)
    throw std::invalid_argument("evaluate: task \"classification\" needs a sequence-classification head (num_labels); " +
                                config.modelDir + " has " + models::toString(mc.head));
  if (cc.head != mc.head || cc.numLabels != mc.numLabels)
    throw std::invalid_argument("evaluate: the converted model (" +
                                (config.converted.empty() ? config.modelDir : config.converted) + ") has a " +
                                models::toString(cc.head) + " head" +
                                (cc.numLabels > 0 ? " of " + std::to_string(cc.numLabels) + " labels" : std::string()) +
                                ", the teacher (" + config.modelDir + ") a " + models::toString(mc.head) +
                                (mc.numLabels > 0 ? " of " + std::to_string(mc.numLabels) + " labels" : std::string()));
  m.tableLayers = config.layers;
  if (m.tableLayers.empty())
    for (int64_t l = 0; l < mc.layers; ++l)
      if (cc.plan.layers[static_cast<size_t>(l)].linear) m.tableLayers.push_back(l);
  for (const auto l : m.tableLayers) {
    if (l < 0 || l >= mc.layers)
      throw std::invalid_argument("evaluate: layer " + std::to_string(l) + " outside [0, " + std::to_string(mc.layers) + ")");
    if (cc.plan.layers[static_cast<size_t>(l)].linear) m.trainedLayers.push_back(l);
  }
  return m;
}

// What the run file declares before SWMR starts: the task's scalars, and per feature map its
// means and its per-head tables.
runs::RunHeader evaluateRunHeader(const EvaluateConfig& config, const models::TransformerModel& teacher,
                                  const std::vector<std::string>& mapNames) {
  runs::RunHeader header;
  header.runId = makeRunId("evaluate");
  header.kind = "evaluate";
  header.configJson = toJson(config).dump();
  header.engineVersion = engineVersion();
  header.device = deviceLabelOf(teacher);
  auto& layout = header.layout;
  if (config.task == "lm")
    layout.scalars = {{"nll_original", "nats"}, {"nll_converted", "nats"}, {"perplexity_original"}, {"perplexity_converted"},
                      {"perplexity_ratio"}};
  else
    layout.scalars = {{"accuracy_original"}, {"accuracy_converted"}};
  layout.scalars.push_back({"entropy_softmax_mean", "nats"});
  layout.layers = static_cast<int>(teacher.config().layers);
  layout.heads = static_cast<int>(teacher.config().heads);
  layout.tables.push_back({"entropy_softmax", "nats"});
  for (const auto& name : mapNames) {
    layout.scalars.push_back({"kl_mean_" + name, "nats"});
    layout.scalars.push_back({"entropy_mean_" + name, "nats"});
    layout.scalars.push_back({"monotonicity_mean_" + name, "rho"});
    layout.tables.push_back({"kl_" + name, "nats"});
    layout.tables.push_back({"entropy_" + name, "nats"});
    layout.tables.push_back({"monotonicity_" + name, "rho"});
  }
  return header;
}

// One evaluation under way: the models, the held-out rows, the run file, the progress count and
// the result it fills.
class Evaluation {
 public:
  Evaluation(const EvaluateConfig& config, JobObserver& observer, Models& models, HeldOut heldOut, runs::RunWriter& writer,
             EvaluateResult& result)
      : config_(config), observer_(observer), m_(models), heldOut_(std::move(heldOut)), writer_(writer), result_(result),
        lm_(config.task == "lm"),
        tableRows_(config.tableSequences > 0 ? std::min(config.tableSequences, heldOut_.rows()) : heldOut_.rows()) {}

  // Progress: both models' task batches, then the table's batches on the teacher (every map but
  // "trained" at once) and on the converted model when a row is "trained".
  void start(const std::vector<std::string>& mapNames) {
    const int64_t batches = (heldOut_.rows() + config_.batchSize - 1) / config_.batchSize;
    const int64_t tableBatches = (tableRows_ + config_.batchSize - 1) / config_.batchSize;
    const bool trained = std::find(mapNames.begin(), mapNames.end(), "trained") != mapNames.end();
    total_ = 2 * batches + (trained ? 2 : 1) * tableBatches;
    observer_.started(result_.runFile, total_);
    log("evaluate " + m_.teacher->config().describe() + " | converted: " +
        (config_.converted.empty() ? config_.featureMap + " (untrained)" : config_.converted) + " | " + config_.task + " on " +
        std::to_string(heldOut_.rows()) + " held-out sequences of " + std::to_string(heldOut_.ids.size(1)) +
        " tokens, attention table on " + std::to_string(tableRows_));
  }

  void log(const std::string& line) {
    writer_.log(line);
    observer_.log(line);
  }

  // Both models' task quality, into the result and the run file.
  void recordQuality() {
    const double original = taskQuality(*m_.teacher, "original model");
    const double converted = taskQuality(*m_.converted, "converted model");
    auto& r = result_;
    std::map<std::string, double> scalars;
    if (lm_) {
      r.nllOriginal = original, r.nllConverted = converted;
      r.perplexityOriginal = std::exp(original), r.perplexityConverted = std::exp(converted);
      scalars = {{"nll_original", original}, {"nll_converted", converted}, {"perplexity_original", r.perplexityOriginal},
                 {"perplexity_converted", r.perplexityConverted}, {"perplexity_ratio", r.perplexityConverted / r.perplexityOriginal}};
      log("perplexity: original " + std::to_string(r.perplexityOriginal) + ", converted " +
          std::to_string(r.perplexityConverted) + " over " + std::to_string(r.predictions) + " predictions");
    } else {
      r.accuracyOriginal = original, r.accuracyConverted = converted;
      scalars = {{"accuracy_original", original}, {"accuracy_converted", converted}};
      log("accuracy: original " + std::to_string(original) + ", converted " + std::to_string(converted) + " over " +
          std::to_string(r.predictions) + " examples");
    }
    writer_.appendScalars(0, scalars);
    observer_.scalars(0, scalars);
  }

  // The table's rows, recorded in the config's order: "trained" measures the converted model
  // (against its own softmax: full finetuning changes q and k), every other name the teacher with
  // that map at its initialisation on the table's layers. Those maps are measured together: one
  // teacher forward, softmax and ranking of its scores per layer and batch serve them all. The
  // teacher's softmax entropy comes from the same pass.
  void measureRows(const std::vector<std::string>& names) {
    std::vector<std::string> teacherMaps;
    const auto untrained = [](const std::string& name) { return name != "trained"; };
    std::copy_if(names.begin(), names.end(), std::back_inserter(teacherMaps), untrained);
    std::map<std::string, HeadMeasures> rows;
    if (teacherMaps.size() < names.size()) rows["trained"] = measure(*m_.converted, "trained").front();
    const auto label = teacherMaps.empty()      ? std::string("softmax")
                       : teacherMaps.size() == 1 ? teacherMaps.front()
                                                 : std::to_string(teacherMaps.size()) + " feature maps";
    const auto teacher = measure(*m_.teacher, label, candidateModules(teacherMaps));
    recordSoftmaxEntropy(teacher.front().entropySoftmax);
    for (size_t i = 0; i < teacherMaps.size(); ++i) rows[teacherMaps[i]] = teacher[i + 1];
    for (const auto& name : names)
      recordRow(name, rows.at(name), name == "trained" ? m_.trainedLayers : m_.tableLayers);
  }

  std::string cancelledMessage() const {
    return "cancelled after " + std::to_string(done_) + " of " + std::to_string(total_) + " batches";
  }

 private:
  void checkCancel() {
    if (observer_.cancelled()) throw JobCancelled();
  }

  // Task quality of one model: mean next-token NLL (lm) or accuracy (classification).
  double taskQuality(models::TransformerModel& model, const std::string& phase) {
    at::NoGradGuard noGrad;
    double sum = 0;
    int64_t count = 0;
    for (int64_t start = 0; start < heldOut_.rows(); start += config_.batchSize) {
      checkCancel();
      const auto batch = heldOut_.slice(start, std::min(config_.batchSize, heldOut_.rows() - start));
      models::ForwardOptions options;
      options.attentionMask = batch.mask;
      const auto logits = model.forward(batch.ids, options).logits;
      if (lm_) {  // logits [B, T, V]: position t predicts token t + 1 (log-softmax in fp32, sum in fp64)
        const int64_t T = batch.ids.size(1);
        const auto logp = torch::log_softmax(logits.narrow(1, 0, T - 1).to(torch::kFloat), -1);
        const auto targets = batch.ids.narrow(1, 1, T - 1).unsqueeze(-1);  // [B, T-1, 1]
        sum += -logp.gather(-1, targets).to(torch::kDouble).sum().item<double>();
        count += batch.ids.size(0) * (T - 1);
      } else {  // logits [B, K]
        sum += logits.argmax(-1).eq(batch.labels).sum().item<double>();
        count += batch.ids.size(0);
      }
      observer_.progress(++done_, total_, phase);
    }
    result_.predictions = count;
    return sum / double(std::max<int64_t>(count, 1));
  }

  // Each map's linear attention for the table's layers (empty elsewhere), [map][layer]: made by
  // the teacher's own plan, so initialised and seeded as a converted model's are, then taken out.
  std::vector<std::vector<attn::LinearAttention>> candidateModules(const std::vector<std::string>& maps) {
    std::vector<std::vector<attn::LinearAttention>> out;
    for (const auto& name : maps) {
      attn::LinearAttentionConfig linear;
      const auto spec = attn::parseFeatureMapSpec(name);  // a kind, or exp_t=<t>
      linear.featureMap.kind = spec.kind;
      linear.featureMap.expT = spec.expT;
      linear.featureMap.seed = config_.seed;
      m_.teacher->setAttentionPlan(models::AttentionPlan::hybrid(m_.teacher->layerCount(), m_.tableLayers, linear));
      auto& modules = out.emplace_back();
      for (int64_t l = 0; l < m_.teacher->layerCount(); ++l) modules.push_back(m_.teacher->linearAttention(l));
    }
    m_.teacher->setAttentionPlan(models::AttentionPlan{});
    return out;
  }

  // Per-head tables averaged over the table's batches: [0] the model's own (its softmax entropy,
  // and its linear layers against their softmax), then one per candidate (probeAttention's
  // candidateHeads). Each batch counts by its real query rows (RowWeightedMeans).
  std::vector<HeadMeasures> measure(models::TransformerModel& model, const std::string& label,
                                    std::vector<std::vector<attn::LinearAttention>> candidates = {}) {
    const int L = static_cast<int>(model.config().layers), H = static_cast<int>(model.config().heads);
    std::vector<RowWeightedMeans> means(1 + candidates.size(), RowWeightedMeans(L, H));
    ProbeRequest request;
    request.candidates = std::move(candidates);
    for (int64_t start = 0; start < tableRows_; start += config_.batchSize) {
      checkCancel();
      const int64_t n = std::min(config_.batchSize, tableRows_ - start);
      const auto batch = heldOut_.slice(start, n);
      const auto probed = probeAttention(model, batch.ids, batch.mask, request);
      const double rows = batch.mask.defined() ? batch.mask.sum().item<double>() : double(batch.ids.numel());
      means.front().add(probed.heads, rows);
      for (size_t m = 0; m < probed.candidateHeads.size(); ++m) means[m + 1].add(probed.candidateHeads[m], rows);
      observer_.progress(++done_, total_, "attention table: " + label);
    }
    std::vector<HeadMeasures> out;
    for (const auto& m : means) out.push_back(m.result());
    return out;
  }

  void recordSoftmaxEntropy(const HeadTable& entropy) {
    result_.softmaxEntropyTable = entropy;
    result_.softmaxEntropy = meanOver(entropy, m_.tableLayers);
    writer_.appendTable(0, "entropy_softmax", entropy.values);
    writer_.appendScalar(0, "entropy_softmax_mean", result_.softmaxEntropy);
  }

  // A measured row: its tables and their means over the table's layers, into the result and the
  // run file (flushed, so a reader sees each row as it comes).
  void recordRow(const std::string& name, const HeadMeasures& tables, const std::vector<int64_t>& layers) {
    FeatureMapEvaluation row;
    row.name = name;
    row.klTable = tables.kl;
    row.entropyTable = tables.entropyLinear;
    row.monotonicityTable = tables.monotonicity;
    row.klTable.name = "kl_" + name;
    row.entropyTable.name = "entropy_" + name;
    row.monotonicityTable.name = "monotonicity_" + name;
    row.kl = meanOver(row.klTable, layers);
    row.entropy = meanOver(row.entropyTable, layers);
    row.monotonicity = meanOver(row.monotonicityTable, layers);
    const std::map<std::string, double> rowScalars{
        {"kl_mean_" + name, row.kl}, {"entropy_mean_" + name, row.entropy}, {"monotonicity_mean_" + name, row.monotonicity}};
    for (const auto* t : {&row.klTable, &row.entropyTable, &row.monotonicityTable}) writer_.appendTable(0, t->name, t->values);
    writer_.appendScalars(0, rowScalars);
    observer_.scalars(0, rowScalars);
    log(name + ": KL " + std::to_string(row.kl) + ", entropy " + std::to_string(row.entropy) + ", monotonicity " +
        std::to_string(row.monotonicity));
    result_.featureMaps.push_back(std::move(row));
    writer_.flush();
  }

  const EvaluateConfig& config_;
  JobObserver& observer_;
  Models& m_;
  const HeldOut heldOut_;
  runs::RunWriter& writer_;
  EvaluateResult& result_;
  const bool lm_;
  const int64_t tableRows_;
  int64_t done_ = 0, total_ = 0;
};

}  // namespace

EvaluateResult runEvaluate(const EvaluateConfig& config, JobObserver& observer) {
  const auto started = std::chrono::steady_clock::now();
  hh::initRuntime();
  const attn::SeededInitialValues initialValues(config.seed);
  checkConfig(config);
  const auto mapNames = evaluateFeatureMapNames(config);
  const auto load = loadOptions(config.device, config.dtype);
  auto models = loadModels(config, load);
  const auto tokenizer = loadTokenizerFor(*models.teacher, config.modelDir);
  auto heldOut = loadHeldOut(config, *tokenizer).to(load.device);

  EvaluateResult result;
  result.device = deviceLabelOf(*models.teacher);
  result.task = config.task;
  result.sequences = heldOut.rows();
  result.runFile = (fs::path(config.runDir) / "run.h5").string();
  fs::create_directories(config.runDir);
  runs::RunWriterOptions writerOptions;
  writerOptions.overwrite = true;
  auto writer =
      runs::RunWriter::create(result.runFile, evaluateRunHeader(config, *models.teacher, mapNames), writerOptions);
  Evaluation evaluation(config, observer, models, std::move(heldOut), writer, result);
  evaluation.start(mapNames);
  try {
    evaluation.recordQuality();
    evaluation.measureRows(mapNames);
    result.status = JobStatus::Completed;
  } catch (const JobCancelled&) {
    result.status = JobStatus::Cancelled;
    result.message = evaluation.cancelledMessage();
  } catch (const std::exception& e) {
    result.status = JobStatus::Failed;
    result.message = errorText(e);
  }
  if (result.message.empty()) {
    result.message = config.task == "lm"
                         ? "perplexity " + std::to_string(result.perplexityOriginal) + " -> " + std::to_string(result.perplexityConverted)
                         : "accuracy " + std::to_string(result.accuracyOriginal) + " -> " + std::to_string(result.accuracyConverted);
    result.message += "; " + std::to_string(result.featureMaps.size()) + " feature maps measured";
  }
  finishRun(writer, observer, result.status, result.message, -1);
  result.seconds = secondsSince(started);
  return result;
}

}  // namespace hh::jobs

// ConvertConfig <-> JSON: the project file of a conversion. The shared keys live at the top; each
// stage's section holds that job's own keys (every default written out by toJson).
#include <algorithm>
#include <set>

#include "engine/config/attention_plan.h"
#include "engine/config/compute_dtype.h"
#include "engine/config/convert_config.h"
#include "engine/config/json_reader.h"

namespace hh::jobs {
namespace {

// Keys of a stage's own config that the convert job sets from the shared ones (or its folders).
const std::set<std::string>& stageOwnedKeys() {
  static const std::set<std::string> keys{"model",       "run_dir", "output_dir", "adapters", "converted",
                                          "feature_map", "rule",    "layers",     "window",   "plan",
                                          "data",        "seed",    "resume",     "device",   "dtype"};
  return keys;
}

nlohmann::json stageSection(nlohmann::json stage) {
  for (const auto& key : stageOwnedKeys()) stage.erase(key);
  return stage;
}

// What to do instead of setting `section.key`, a key the conversion sets: most have a top-level
// key of the same name; adapters, converted and resume have none (the message named a top-level
// "resume" that does not exist).
std::string ownedKeyAdvice(const std::string& section, const std::string& key) {
  if (key == "resume") return "a conversion has no resume: its stages always start afresh; remove the key";
  if (key == "adapters") return "the finetune stage starts from the distill stage's adapters; remove the key";
  if (key == "converted") return "the evaluate stage measures the conversion's own model; remove the key";
  if (key == "output_dir") return "set \"output_dir\" at the top level for the exported model's folder";
  if (key == "data" && section == "evaluate")
    return "set \"eval_data\" (or \"data\") at the top level for the evaluate stage's text";
  if (key == "model") return "set \"model\" at the top level (the teacher every stage starts from)";
  return "set \"" + key + "\" at the top level (where it applies)";
}

nlohmann::json checkedSection(const nlohmann::json& j, const char* name) {
  if (!j.contains(name)) return nlohmann::json::object();
  const auto& section = j.at(name);
  if (!section.is_object())
    throw std::invalid_argument(std::string("convert config: \"") + name + "\" must be an object");
  for (const auto& [key, value] : section.items()) {
    if (stageOwnedKeys().count(key))
      throw std::invalid_argument(std::string("convert config: \"") + name + "." + key +
                                  "\" is set by the conversion; " + ownedKeyAdvice(name, key));
  }
  return section;
}

}  // namespace

nlohmann::json toJson(const ConvertConfig& c) {
  return {{"model", c.modelDir},
          {"run_dir", c.runDir},
          {"output_dir", c.outputDir},
          {"feature_map", c.featureMap},
          {"rule", c.rule},
          {"layers", c.layers},
          {"window", c.window},
          {"plan", c.plan},
          {"seed", c.seed},
          {"device", c.device},
          {"dtype", c.dtype},
          {"data", toJson(c.data)},
          {"eval_data", c.evalData ? toJson(*c.evalData) : nlohmann::json()},
          {"distill", stageSection(toJson(c.distill))},
          {"finetune", stageSection(toJson(c.finetune))},
          {"evaluate", stageSection(toJson(c.evaluate))},
          {"export", {{"dtype", c.exportOptions.dtype}, {"adapters_only", c.exportOptions.adaptersOnly}}}};
}

ConvertConfig convertConfigFromJson(const nlohmann::json& j) {
  ConvertConfig c;
  if (!j.is_object()) throw std::invalid_argument("convert config: must be a JSON object");
  JsonReader r{j, "convert config", {}};
  r.read("model", c.modelDir);
  r.read("run_dir", c.runDir);
  r.read("output_dir", c.outputDir);
  r.read("feature_map", c.featureMap);
  r.read("rule", c.rule);
  r.read("layers", c.layers);
  r.read("window", c.window);
  r.read("plan", c.plan);
  r.read("seed", c.seed);
  r.read("device", c.device);
  r.read("dtype", c.dtype);
  checkComputeDtype(c.dtype, r.where);
  for (const char* key : {"data", "eval_data", "distill", "finetune", "evaluate", "export"}) r.seen.insert(key);
  if (j.contains("data")) c.data = dataConfigFromJson(j.at("data"), "convert config \"data\"");
  if (j.contains("eval_data") && !j.at("eval_data").is_null())
    c.evalData = dataConfigFromJson(j.at("eval_data"), "convert config \"eval_data\"");
  c.distill = distillConfigFromJson(checkedSection(j, "distill"));
  c.finetune = finetuneConfigFromJson(checkedSection(j, "finetune"));
  // The converted model exists once the stages before have run ("trained" rows need it).
  auto evaluateSection = checkedSection(j, "evaluate");
  evaluateSection["converted"] = "(the converted model)";
  c.evaluate = evaluateConfigFromJson(evaluateSection);
  c.evaluate.converted.clear();
  if (j.contains("export")) {
    const auto& e = j.at("export");
    if (!e.is_object()) throw std::invalid_argument("convert config: \"export\" must be an object");
    JsonReader er{e, "convert config \"export\"", {}};
    er.read("dtype", c.exportOptions.dtype);
    er.read("adapters_only", c.exportOptions.adaptersOnly);
    er.checkUnknownKeys();
  }
  r.checkUnknownKeys();
  const auto& dtype = c.exportOptions.dtype;
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16")
    throw std::invalid_argument("convert config: export.dtype must be float32, float16 or bfloat16 (got \"" + dtype +
                                "\")");
  if (c.featureMap == "softmax")
    throw std::invalid_argument("convert config: feature_map \"softmax\" converts nothing");
  models::checkPlanKeys({c.featureMap, c.rule, c.window, c.layers, c.plan, c.seed}, r.where);
  checkConvertTasks(c);
  return c;
}

void checkConvertTasks(const ConvertConfig& c) {
  if (c.evaluate.task == "classification" && !c.evalData && c.finetune.task != "classification")
    throw std::invalid_argument(
        "convert config: evaluate.task \"classification\" needs labelled data: set \"eval_data\" (a .tsv or "
        ".jsonl file with text and label, or spamassassin), or finetune.task \"classification\" with its "
        "\"classification\" data (the LM corpus in \"data\" has no labels)");
  // Without finetuning the converted model is the teacher + adapters: finetune.task plays no part.
  if (c.finetune.steps <= 0 || c.finetune.task == c.evaluate.task) return;
  throw std::invalid_argument("convert config: finetune.task \"" + c.finetune.task + "\" and evaluate.task \"" +
                              c.evaluate.task +
                              "\" differ: the evaluate stage measures the finetuned model, whose head is the "
                              "finetune task's; set both to the same task (or finetune.steps to 0)");
}

DistillConfig distillStage(const ConvertConfig& c) {
  DistillConfig d = c.distill;
  d.modelDir = c.modelDir;
  d.runDir = c.runDir + "/distill";
  d.featureMap = c.featureMap;
  d.rule = c.rule;
  d.layers = c.layers;
  d.window = c.window;
  d.plan = c.plan;
  d.data = c.data;
  d.seed = c.seed;
  d.device = c.device;
  d.dtype = c.dtype;
  d.resume = false;
  return d;
}

FinetuneConfig finetuneStage(const ConvertConfig& c) {
  FinetuneConfig f = c.finetune;
  f.modelDir = c.modelDir;
  f.adapters = c.runDir + "/distill/adapters.safetensors";
  f.runDir = c.runDir + "/finetune";
  f.outputDir = c.runDir + "/finetune/model";
  f.data = c.data;
  f.seed = c.seed;
  f.device = c.device;
  f.dtype = c.dtype;
  return f;
}

namespace {

// The finetune stage's labelled data as the evaluate stage reads it: the same file, tokenization,
// seed and fraction, so the rows it evaluates are those the finetune split held out. With
// max_examples the finetune job shuffles and keeps that many before the split, the evaluate job
// splits them all: the first rows of both held-out splits agree, and the finetune split has
// round(fraction * max_examples) of them at most.
DataConfig heldOutClassificationData(const ClassificationDataConfig& f) {
  DataConfig d;
  d.corpus = f.path;
  d.sequenceLength = f.sequenceLength;
  d.validationFraction = f.validationFraction;
  d.seed = f.seed;
  d.maxTrainSequences = 0;
  d.maxValidationSequences =
      f.maxExamples > 0 ? std::max<int64_t>(1, static_cast<int64_t>(f.validationFraction * double(f.maxExamples) + 0.5))
                        : 0;  // 0: the whole split (the evaluate stage's max_sequences still caps it)
  return d;
}

}  // namespace

EvaluateConfig evaluateStage(const ConvertConfig& c) {
  EvaluateConfig e = c.evaluate;
  e.modelDir = c.modelDir;
  e.converted = c.finetune.steps > 0 ? c.runDir + "/finetune/model" : c.runDir + "/distill/adapters.safetensors";
  e.featureMap = c.featureMap;
  e.layers = c.layers;
  e.runDir = c.runDir + "/evaluate";
  if (c.evalData)
    e.data = *c.evalData;
  else if (c.evaluate.task == "classification" && c.finetune.task == "classification")
    e.data = heldOutClassificationData(c.finetune.classification);  // checkConvertTasks refuses the other case
  else
    e.data = c.data;
  e.seed = c.seed;
  e.device = c.device;
  e.dtype = c.dtype;
  return e;
}

}  // namespace hh::jobs

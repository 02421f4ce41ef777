// Pickle-free training checkpoints (see training_checkpoint.h).
#include "engine/jobs/training_checkpoint.h"
#include "engine/core/error_text.h"

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/io/durable_file.h"
#include "engine/io/safetensors.h"
#include "engine/models/tensor_file.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "hedgehog-training-checkpoint/1";

std::vector<torch::Tensor> allParameters(torch::optim::AdamW& optimizer) {
  std::vector<torch::Tensor> out;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) out.push_back(p);
  return out;
}

// The optimizer keys its per-parameter state by the parameter's TensorImpl: printed as a string in
// LibTorch 1.x, the pointer itself in 2.x.
using StateKey = std::remove_reference_t<decltype(std::declval<torch::optim::AdamW&>().state())>::key_type;

template <typename Key>
Key stateKeyOf(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // as LibTorch 1.x writes it (c10::guts::to_string)
    text << p.unsafeGetTensorImpl();
    return text.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

StateKey stateKey(const torch::Tensor& p) {
  return stateKeyOf<StateKey>(p);
}

std::string shapeText(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error("training checkpoint '" + path + "': " + problem);
}

}  // namespace

void saveTrainingCheckpoint(const std::string& path, torch::optim::AdamW& optimizer, const nlohmann::json& counters,
                            const std::vector<std::pair<std::string, torch::Tensor>>& extra) {
  const auto params = allParameters(optimizer);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::vector<int64_t> steps(params.size(), -1);
  nlohmann::json groups = nlohmann::json::array();
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    groups.push_back({{"lr", o.lr()},
                      {"betas", {std::get<0>(o.betas()), std::get<1>(o.betas())}},
                      {"eps", o.eps()},
                      {"weight_decay", o.weight_decay()},
                      {"amsgrad", o.amsgrad()},
                      {"params", group.params().size()}});
  }
  auto& state = optimizer.state();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto index = std::to_string(i);
    tensors.emplace_back("param." + index, params[i].detach());
    const auto it = state.find(stateKey(params[i]));
    if (it == state.end()) continue;
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    steps[i] = s.step();
    tensors.emplace_back("adamw.exp_avg." + index, s.exp_avg());
    tensors.emplace_back("adamw.exp_avg_sq." + index, s.exp_avg_sq());
    if (s.max_exp_avg_sq().defined()) tensors.emplace_back("adamw.max_exp_avg_sq." + index, s.max_exp_avg_sq());
  }
  tensors.emplace_back("adamw.step", torch::tensor(steps, torch::kLong));
  for (const auto& [name, t] : extra) tensors.emplace_back("extra." + name, t.detach());
  const std::map<std::string, std::string> metadata{{"format", kFormat},
                                                    {"parameters", std::to_string(params.size())},
                                                    {"adamw_groups", groups.dump()},
                                                    {"hedgehog_checkpoint", counters.dump()}};
  models::writeTensorFile(path, tensors, metadata);
  // The readable copy of the counters (resume does not read it).
  io::writeFileAtomically(fs::path(path).replace_extension(".json").string(), counters.dump(2) + "\n");
}

namespace {

// What a checkpoint holds for the optimizer, read and checked before anything of the job changes.
struct RestoredState {
  std::vector<torch::Tensor> values;                                   // per parameter
  std::vector<std::unique_ptr<torch::optim::AdamWParamState>> states;  // null: no AdamW state yet
  std::vector<torch::optim::AdamWOptions> groupOptions;                // per parameter group
};

// One checkpoint file being read: every problem names the file.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path) : path_(path), file_(open(path)) {}

  [[noreturn]] void fail(const std::string& problem) const { jobs::fail(path_, problem); }

  std::string metadata(const char* key) const {
    const auto& meta = file_.metadata();
    const auto it = meta.find(key);
    if (it == meta.end()) fail(std::string("no \"") + key + "\" metadata: not a checkpoint written by hedgehog");
    return it->second;
  }

  nlohmann::json metadataJson(const char* key) const {
    try {
      return nlohmann::json::parse(metadata(key));
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("metadata is not JSON (") + e.what() + ")");
    }
  }

  // The tensor `name`, which must have the live parameter's shape; in its dtype, on its device.
  torch::Tensor tensorLike(const std::string& name, const torch::Tensor& like) const {
    if (!file_.contains(name)) fail("no tensor '" + name + "'");
    const auto& info = file_.info(name);
    if (c10::IntArrayRef(info.shape) != like.sizes())
      fail("tensor '" + name + "' has shape " + shapeText(info.shape) + ", the live parameter " +
           shapeText(like.sizes()));
    return models::readTensor(file_, name, like.scalar_type()).to(like.device());
  }

  // AdamW's step count per parameter (-1: no state yet).
  torch::Tensor steps(size_t parameterCount) const {
    if (!file_.contains("adamw.step")) fail("no tensor 'adamw.step'");
    const auto steps = models::readTensor(file_, "adamw.step", torch::kLong);
    if (steps.numel() != static_cast<int64_t>(parameterCount))
      fail("'adamw.step' does not have one entry per parameter");
    return steps;
  }

  bool contains(const std::string& name) const { return file_.contains(name); }

  std::map<std::string, torch::Tensor> extras() const {
    std::map<std::string, torch::Tensor> out;
    for (const auto& name : file_.names())
      if (name.rfind("extra.", 0) == 0)
        out[name.substr(6)] =
            models::readTensor(file_, name, file_.info(name).dtype == "I64" ? torch::kLong : torch::kFloat);
    return out;
  }

 private:
  static io::SafetensorsFile open(const std::string& path) {
    try {
      return io::SafetensorsFile::open(path);
    } catch (const std::exception& e) {
      jobs::fail(path, "unreadable (" + errorText(e) + ")");
    }
  }

  std::string path_;
  io::SafetensorsFile file_;
};

std::unique_ptr<torch::optim::AdamWParamState> readAdamState(const CheckpointReader& reader, int64_t step,
                                                             const std::string& index, const torch::Tensor& param) {
  if (step < 0) return nullptr;
  auto s = std::make_unique<torch::optim::AdamWParamState>();
  s->step(step);
  s->exp_avg(reader.tensorLike("adamw.exp_avg." + index, param));
  s->exp_avg_sq(reader.tensorLike("adamw.exp_avg_sq." + index, param));
  const auto maxName = "adamw.max_exp_avg_sq." + index;
  if (reader.contains(maxName)) s->max_exp_avg_sq(reader.tensorLike(maxName, param));
  return s;
}

// A resume continues the same optimizer: a setting the job's config changed since the checkpoint
// is refused (it would otherwise be the file's, while the run file records the config's).
void checkSameSetting(const CheckpointReader& reader, size_t group, const char* name, double saved, double now) {
  if (saved == now) return;
  std::ostringstream text;
  text << "was written with " << name << " " << saved << " (parameter group " << group << "), the job now has " << now
       << "; a resume continues the same optimizer (start a new run_dir to change it)";
  reader.fail(text.str());
}

// The group settings saved as JSON, one per optimizer group, each with the optimizer's own
// parameter count; the live optimizer's settings must match, its lr is the file's.
std::vector<torch::optim::AdamWOptions> readGroupOptions(const CheckpointReader& reader, const nlohmann::json& groups,
                                                         torch::optim::AdamW& optimizer) {
  const auto& live = optimizer.param_groups();
  if (!groups.is_array() || groups.size() != live.size())
    reader.fail("\"adamw_groups\" does not match the optimizer's " + std::to_string(live.size()) + " groups");
  std::vector<torch::optim::AdamWOptions> out;
  try {
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto& j = groups[g];
      if (j.at("params").get<size_t>() != live[g].params().size())
        reader.fail("parameter group " + std::to_string(g) + " has a different number of parameters");
      auto o = static_cast<const torch::optim::AdamWOptions&>(live[g].options());
      checkSameSetting(reader, g, "beta1", j.at("betas").at(0).get<double>(), std::get<0>(o.betas()));
      checkSameSetting(reader, g, "beta2", j.at("betas").at(1).get<double>(), std::get<1>(o.betas()));
      checkSameSetting(reader, g, "eps", j.at("eps").get<double>(), o.eps());
      checkSameSetting(reader, g, "weight_decay", j.at("weight_decay").get<double>(), o.weight_decay());
      checkSameSetting(reader, g, "amsgrad", j.at("amsgrad").get<bool>(), o.amsgrad());
      o.lr(j.at("lr").get<double>());  // the schedule sets it again before each step
      out.push_back(o);
    }
  } catch (const nlohmann::json::exception& e) {
    reader.fail(std::string("\"adamw_groups\" is malformed (") + e.what() + ")");
  }
  return out;
}

RestoredState readRestoredState(const CheckpointReader& reader, torch::optim::AdamW& optimizer,
                                const std::vector<torch::Tensor>& params) {
  if (reader.metadata("parameters") != std::to_string(params.size()))
    reader.fail("holds " + reader.metadata("parameters") + " parameters, the job trains " +
                std::to_string(params.size()) + " (a different model, plan or mode?)");
  RestoredState out;
  out.groupOptions = readGroupOptions(reader, reader.metadataJson("adamw_groups"), optimizer);
  const auto steps = reader.steps(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto index = std::to_string(i);
    out.values.push_back(reader.tensorLike("param." + index, params[i]));
    out.states.push_back(readAdamState(reader, steps[static_cast<int64_t>(i)].item<int64_t>(), index, params[i]));
  }
  return out;
}

void applyRestoredState(RestoredState& restored, torch::optim::AdamW& optimizer,
                        const std::vector<torch::Tensor>& params) {
  for (size_t g = 0; g < restored.groupOptions.size(); ++g)
    static_cast<torch::optim::AdamWOptions&>(optimizer.param_groups()[g].options()) = restored.groupOptions[g];
  at::NoGradGuard noGrad;
  auto& state = optimizer.state();
  state.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(restored.values[i]);
    if (restored.states[i]) state[stateKey(params[i])] = std::move(restored.states[i]);
  }
}

}  // namespace

namespace {

nlohmann::json readCounters(const CheckpointReader& reader) {
  const auto format = reader.metadata("format");
  if (format != kFormat) reader.fail("format \"" + format + "\", expected \"" + kFormat + "\"");
  auto counters = reader.metadataJson("hedgehog_checkpoint");
  if (!counters.is_object()) reader.fail("\"hedgehog_checkpoint\" is not a JSON object");
  return counters;
}

}  // namespace

nlohmann::json readTrainingCheckpointCounters(const std::string& path) {
  return readCounters(CheckpointReader(path));
}

nlohmann::json loadTrainingCheckpoint(const std::string& path, torch::optim::AdamW& optimizer,
                                      std::map<std::string, torch::Tensor>* extra) {
  const CheckpointReader reader(path);
  auto counters = readCounters(reader);
  const auto params = allParameters(optimizer);
  // Everything is read and checked before anything changes: a bad file leaves the job untouched.
  auto restored = readRestoredState(reader, optimizer, params);
  auto extras = extra != nullptr ? reader.extras() : std::map<std::string, torch::Tensor>{};
  applyRestoredState(restored, optimizer, params);
  if (extra != nullptr)
    for (auto& [name, t] : extras) (*extra)[name] = std::move(t);
  return counters;
}

double counterNumber(const nlohmann::json& counters, const char* key, double ifNotNumber) {
  const auto& v = counters.at(key);
  return v.is_number() ? v.get<double>() : ifNotNumber;
}

void refuseLegacyCheckpoint(const std::string& runDir, const std::string& checkpointPath) {
  const auto legacy = fs::path(runDir) / "checkpoint.pt";
  std::error_code ec;
  if (!fs::exists(checkpointPath, ec) && fs::exists(legacy, ec))
    throw std::invalid_argument(legacy.string() +
                                ": a pickle (torch::save) checkpoint from an older hedgehog; it is never loaded. "
                                "Start the run again without --resume");
}

}  // namespace hh::jobs

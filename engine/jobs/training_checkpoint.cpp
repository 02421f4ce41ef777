// Pickle-free training checkpoints (see training_checkpoint.h).
#include "engine/jobs/training_checkpoint.h"

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

StateKey stateKey(const torch::Tensor& p) { return stateKeyOf<StateKey>(p); }

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
    groups.push_back({{"lr", o.lr()}, {"betas", {std::get<0>(o.betas()), std::get<1>(o.betas())}}, {"eps", o.eps()},
                      {"weight_decay", o.weight_decay()}, {"amsgrad", o.amsgrad()}, {"params", group.params().size()}});
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

nlohmann::json loadTrainingCheckpoint(const std::string& path, torch::optim::AdamW& optimizer,
                                      std::map<std::string, torch::Tensor>* extra) {
  io::SafetensorsFile file = [&] {
    try {
      return io::SafetensorsFile::open(path);
    } catch (const std::exception& e) {
      fail(path, std::string("unreadable (") + e.what() + ")");
    }
  }();
  const auto& meta = file.metadata();
  const auto get = [&](const char* key) {
    const auto it = meta.find(key);
    if (it == meta.end()) fail(path, std::string("no \"") + key + "\" metadata: not a checkpoint written by hedgehog");
    return it->second;
  };
  if (get("format") != kFormat) fail(path, "format \"" + get("format") + "\", expected \"" + kFormat + "\"");
  nlohmann::json counters, groups;
  try {
    counters = nlohmann::json::parse(get("hedgehog_checkpoint"));
    groups = nlohmann::json::parse(get("adamw_groups"));
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("metadata is not JSON (") + e.what() + ")");
  }
  const auto params = allParameters(optimizer);
  if (get("parameters") != std::to_string(params.size()))
    fail(path, "holds " + get("parameters") + " parameters, the job trains " + std::to_string(params.size()) +
                   " (a different model, plan or mode?)");
  if (!groups.is_array() || groups.size() != optimizer.param_groups().size())
    fail(path, "\"adamw_groups\" does not match the optimizer's " + std::to_string(optimizer.param_groups().size()) + " groups");
  const auto tensorOf = [&](const std::string& name, const torch::Tensor& like) {
    if (!file.contains(name)) fail(path, "no tensor '" + name + "'");
    const auto& info = file.info(name);
    if (c10::IntArrayRef(info.shape) != like.sizes())
      fail(path, "tensor '" + name + "' has shape " + shapeText(info.shape) + ", the live parameter " + shapeText(like.sizes()));
    return models::readTensor(file, name, like.scalar_type()).to(like.device());
  };
  if (!file.contains("adamw.step")) fail(path, "no tensor 'adamw.step'");
  const auto steps = models::readTensor(file, "adamw.step", torch::kLong);
  if (steps.numel() != static_cast<int64_t>(params.size())) fail(path, "'adamw.step' does not have one entry per parameter");

  // Validate everything before changing anything: a bad file leaves the job untouched.
  std::vector<torch::Tensor> values;
  std::vector<std::unique_ptr<torch::optim::AdamWParamState>> states;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto index = std::to_string(i);
    values.push_back(tensorOf("param." + index, params[i]));
    const int64_t step = steps[static_cast<int64_t>(i)].item<int64_t>();
    if (step < 0) {
      states.emplace_back();
      continue;
    }
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(step);
    s->exp_avg(tensorOf("adamw.exp_avg." + index, params[i]));
    s->exp_avg_sq(tensorOf("adamw.exp_avg_sq." + index, params[i]));
    if (file.contains("adamw.max_exp_avg_sq." + index)) s->max_exp_avg_sq(tensorOf("adamw.max_exp_avg_sq." + index, params[i]));
    states.push_back(std::move(s));
  }
  try {
    for (size_t g = 0; g < groups.size(); ++g) {
      auto& o = static_cast<torch::optim::AdamWOptions&>(optimizer.param_groups()[g].options());
      const auto& j = groups[g];
      if (j.at("params").get<size_t>() != optimizer.param_groups()[g].params().size())
        fail(path, "parameter group " + std::to_string(g) + " has a different number of parameters");
      o.lr(j.at("lr").get<double>());
      o.betas({j.at("betas").at(0).get<double>(), j.at("betas").at(1).get<double>()});
      o.eps(j.at("eps").get<double>());
      o.weight_decay(j.at("weight_decay").get<double>());
      o.amsgrad(j.at("amsgrad").get<bool>());
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("\"adamw_groups\" is malformed (") + e.what() + ")");
  }
  at::NoGradGuard noGrad;
  auto& state = optimizer.state();
  state.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(values[i]);
    if (states[i]) state[stateKey(params[i])] = std::move(states[i]);
  }
  if (!counters.is_object()) fail(path, "\"hedgehog_checkpoint\" is not a JSON object");
  if (extra != nullptr)
    for (const auto& name : file.names())
      if (name.rfind("extra.", 0) == 0) (*extra)[name.substr(6)] = models::readTensor(file, name, file.info(name).dtype == "I64" ? torch::kLong : torch::kFloat);
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

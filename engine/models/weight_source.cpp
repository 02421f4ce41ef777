#include "engine/models/weight_source.h"

#include <torch/types.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "engine/models/tensor_file.h"

namespace hh::models {
namespace fs = std::filesystem;

std::string shapeString(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

bool isIgnoredBuffer(const std::string& name) {
  auto endsWith = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return endsWith(".attn.bias") || endsWith(".attn.masked_bias") || endsWith("position_ids") ||
         endsWith("rotary_emb.inv_freq");
}

WeightSource WeightSource::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (fs::is_regular_file(dir, ec)) {
      io::refusePickle(dir);
      return WeightSource(dir, io::ShardedSafetensors::open(dir));
    }
    throw io::FormatError(dir + ": no such model folder or safetensors file");
  }
  const fs::path base(dir);
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
    if (fs::exists(base / name, ec)) {
      const auto path = (base / name).string();
      return WeightSource(path, io::ShardedSafetensors::open(path));
    }
  }
  // Any other single .safetensors file (some exports name it differently).
  std::vector<std::string> safetensors, pickles;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const auto ext = entry.path().extension().string();
    if (ext == ".safetensors") safetensors.push_back(entry.path().string());
    if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt") pickles.push_back(entry.path().string());
  }
  if (safetensors.size() == 1) return WeightSource(safetensors[0], io::ShardedSafetensors::open(safetensors[0]));
  if (!pickles.empty()) io::refusePickle(pickles.front());  // throws with the conversion hint
  if (safetensors.size() > 1)
    throw io::FormatError(dir + ": several .safetensors files and no model.safetensors.index.json to say which is the model");
  throw io::FormatError(dir + ": no model.safetensors (or model.safetensors.index.json) in this folder");
}

std::string WeightSource::detectPrefix(const std::string& anchor, const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& p : candidates) {
    if (file_.contains(p + anchor)) {
      prefix_ = p;
      return p;
    }
    tried += (tried.empty() ? "\"" : ", \"") + p + anchor + "\"";
  }
  throw io::FormatError(path_ + ": missing tensor " + tried +
                        " (is this checkpoint of the architecture its config.json names?)");
}

bool WeightSource::check(const std::string& name, const std::vector<int64_t>& shape, const std::string& what) {
  if (!file_.contains(name)) return false;
  const auto& info = file_.info(name);
  if (info.shape != shape)
    throw io::FormatError(path_ + ": tensor \"" + name + "\" has shape " + shapeString(info.shape) + ", the config implies " +
                          shapeString(shape) + (what.empty() ? "" : " (" + what + ")"));
  if (info.dtype != "F32" && info.dtype != "F16" && info.dtype != "BF16" && info.dtype != "F64")
    throw io::FormatError(path_ + ": tensor \"" + name + "\" has dtype " + info.dtype +
                          ", a weight must be F32, F16, BF16 or F64");
  used_.insert(name);
  return true;
}

io::FormatError WeightSource::nonFinite(const std::string& name, int64_t bad, int64_t total) const {
  // A NaN or infinite weight (a diverged training run saved as it was, a corrupt export) would
  // only show up later as NaN logits or a NaN loss: refused here, where the tensor is known.
  return io::FormatError(path_ + ": tensor \"" + name + "\" holds " + std::to_string(bad) + " of " + std::to_string(total) +
                         " values that are NaN or infinite (a corrupt checkpoint, or one saved from a diverged training run)");
}

torch::Tensor WeightSource::takeOptional(const std::string& name, const std::vector<int64_t>& shape,
                                         const std::string& what, torch::ScalarType dtype) {
  if (!check(name, shape, what)) return {};
  auto t = readTensor(file_, name, dtype);
  if (t.is_floating_point() && t.numel() > 0 && !torch::isfinite(t).all().item<bool>())
    throw nonFinite(name, (~torch::isfinite(t)).sum().item<int64_t>(), t.numel());
  return t;
}

bool WeightSource::loadOptional(at::Tensor into, const std::string& name, const std::vector<int64_t>& shape,
                                const std::string& what) {
  if (!check(name, shape, what)) return false;
  const int64_t bad = readTensorInto(file_.shardFor(name), name, into);
  if (bad > 0) throw nonFinite(name, bad, into.numel());
  return true;
}

void WeightSource::load(at::Tensor into, const std::string& name, const std::vector<int64_t>& shape, const std::string& what) {
  if (!loadOptional(into, name, shape, what))
    throw io::FormatError(path_ + ": missing tensor \"" + name + "\"" + (what.empty() ? "" : " (" + what + ")"));
}

torch::Tensor WeightSource::take(const std::string& name, const std::vector<int64_t>& shape, const std::string& what,
                                 torch::ScalarType dtype) {
  auto t = takeOptional(name, shape, what, dtype);
  if (!t.defined())
    throw io::FormatError(path_ + ": missing tensor \"" + name + "\"" + (what.empty() ? "" : " (" + what + ")"));
  return t;
}

std::vector<std::string> WeightSource::unused() const {
  std::vector<std::string> out;
  for (const auto& name : file_.names())
    if (!used_.count(name) && !isIgnoredBuffer(name)) out.push_back(name);
  return out;
}

std::string WeightSource::dominantDtype() const {
  std::map<std::string, uint64_t> bytes;
  for (const auto& name : file_.names()) {
    const auto& info = file_.info(name);
    if (info.dtype[0] == 'F' || info.dtype == "BF16") bytes[info.dtype] += info.size;
  }
  std::string best = "F32";
  uint64_t most = 0;
  for (const auto& [dtype, n] : bytes)
    if (n > most) most = n, best = dtype;
  return best;
}

}  // namespace hh::models

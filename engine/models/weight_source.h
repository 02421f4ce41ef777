// Where a model's weights come from: the safetensors of a Hugging Face folder (one file or shards
// through model.safetensors.index.json), with the naming quirks resolved in one place:
//   - an optional prefix in front of the body's names ("transformer." for GPT-2 fixtures, "bert."
//     for BERT, "model." for Llama) detected from an anchor tensor;
//   - every tensor checked against the shape the config implies, with an error that names the
//     file, the tensor, both shapes and the config keys involved;
//   - buffers that are not weights (attn.bias, attn.masked_bias, position_ids) ignored;
//   - pickle checkpoints (pytorch_model.bin, *.pt) refused with the command that converts them.
#pragma once
#include <ATen/core/Tensor.h>

#include <set>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"

namespace hh::models {

class WeightSource {
 public:
  // `dir` holds model.safetensors or model.safetensors.index.json (or `dir` is a .safetensors
  // file). Throws io::FormatError naming the folder and what is there instead.
  static WeightSource open(const std::string& dir);

  // The path that names this source in messages.
  const std::string& path() const { return path_; }
  std::vector<std::string> names() const { return file_.names(); }
  bool contains(const std::string& name) const { return file_.contains(name); }
  const io::TensorInfo& info(const std::string& name) const { return file_.info(name); }

  // Picks the first prefix p (from `candidates`, "" allowed) for which p + anchor exists; the
  // chosen prefix is then used by body(). Throws FormatError listing what was tried.
  std::string detectPrefix(const std::string& anchor, const std::vector<std::string>& candidates);
  std::string body(const std::string& name) const { return prefix_ + name; }

  // The tensor `name`, checked to have `shape`, converted to `dtype`. `what` says which config
  // keys define the shape (for the error). Marks the name as used.
  at::Tensor take(const std::string& name, const std::vector<int64_t>& shape, const std::string& what = "",
                     at::ScalarType dtype = at::kFloat);
  // As take(), but returns an undefined tensor when the name is absent.
  at::Tensor takeOptional(const std::string& name, const std::vector<int64_t>& shape,
                             const std::string& what = "", at::ScalarType dtype = at::kFloat);
  // Reads tensor `name`, checked as take() checks it, straight into `into` (a parameter, or a view
  // of one such as its transpose; shape `shape`): no copy of the whole tensor is made on the way
  // (readTensorInto), so loading a model holds its weights and a few MB, not a second copy of the
  // largest tensor. loadOptional returns false when the name is absent.
  void load(at::Tensor into, const std::string& name, const std::vector<int64_t>& shape, const std::string& what = "");
  bool loadOptional(at::Tensor into, const std::string& name, const std::vector<int64_t>& shape, const std::string& what = "");
  // Names never taken (buffers excluded): shown by preflight as "unused tensors".
  std::vector<std::string> unused() const;
  // The most common floating dtype among the tensors ("F32", "BF16", ...).
  std::string dominantDtype() const;

 private:
  WeightSource(std::string path, io::ShardedSafetensors file) : path_(std::move(path)), file_(std::move(file)) {}
  // Checks a present tensor's shape and dtype (FormatError otherwise) and marks it used; false
  // when absent.
  bool check(const std::string& name, const std::vector<int64_t>& shape, const std::string& what);
  // The error for a tensor holding `bad` non-finite values of `total`.
  io::FormatError nonFinite(const std::string& name, int64_t bad, int64_t total) const;
  std::string path_;
  io::ShardedSafetensors file_;
  std::string prefix_;
  std::set<std::string> used_;
};

// "[32, 96]"
std::string shapeString(const std::vector<int64_t>& shape);
// Whether a tensor name is a buffer the models never read (causal-mask buffers, position ids).
bool isIgnoredBuffer(const std::string& name);

}  // namespace hh::models

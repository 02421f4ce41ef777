// The compute dtype of a job, by name (the "dtype" key of the distill, finetune, train, evaluate
// and convert configs; --dtype of the CLI verbs that run a model):
//   "float32"   everything in fp32 (the default);
//   "bfloat16"  weights that do not train and the activations in bf16 (half the memory, the
//               GPU's tensor-core rate); what trains keeps fp32 master weights; norms, softmax,
//               the linear forms' normalisers and states, KL and the losses compute in fp32
//               (models::TransformerModel::setComputeDtype);
//   "float64"   every weight, activation, state and loss in fp64: slow, for telling a numerical
//               failure of fp32 (an overflowing feature map, say) from a failure of the method.
// Torch-free: the jobs map the name to a torch dtype.
#pragma once
#include <string>
#include <vector>

namespace hh::jobs {

// The names accepted, in the order menus list them.
const std::vector<std::string>& computeDtypeNames();

// Throws std::invalid_argument "<where>: dtype must be float32, bfloat16 or float64, got \"x\"".
void checkComputeDtype(const std::string& name, const std::string& where);

}  // namespace hh::jobs

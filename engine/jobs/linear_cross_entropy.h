// The LM losses with the LM head fused in: logits made, used and dropped a chunk of rows at
// a time, so that [rows, vocab] never exists at once in fp32 (8 x 1024 GPT-2 tokens: 1.6 GB), and
// their gradient made in the same pass (softmax - one-hot), so the backward is two products.
#pragma once
#include <torch/types.h>

#include "engine/models/transformer_model.h"

namespace hh::jobs {

// mean over rows of -log softmax(hidden W^T)[target]: hidden [N, C] (compute dtype), W [V, C] (any
// floating dtype; used in hidden's), targets [N] int64. Logits in hidden's dtype, softmax and the
// sums in fp32 (as cross_entropy on logits.float()). Autograd to hidden and W; the gradients are
// made in the forward (when grad mode is on and either needs one) and scaled in the backward.
// chunkRows <= 0: rows per chunk such that one chunk's fp32 logits stay near 64 MiB.
torch::Tensor linearCrossEntropy(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                                 int64_t chunkRows = 0);

// teacherKlLoss (training_support.h) the same way: mean over rows of KL(softmax(teacherHidden
// teacherWeight^T) || softmax(hidden weight^T)), teacherHidden [N, C'] and teacherWeight [V, C']
// without gradients; autograd to hidden and weight.
torch::Tensor linearTeacherKl(const torch::Tensor& hidden, const torch::Tensor& weight,
                              const torch::Tensor& teacherHidden, const torch::Tensor& teacherWeight,
                              int64_t chunkRows = 0);

// nextTokenLoss(model.forward(ids).logits, ids) without the logits: the model run to its final
// hidden states, then linearCrossEntropy with its output embedding, where it has one (GPT-2 and
// Llama language models); other models (classifiers, BERT) take the logits path. ids [B, T].
torch::Tensor modelNextTokenLoss(models::TransformerModel& model, const torch::Tensor& ids,
                                 models::ForwardOptions options = {});

// teacherKlLoss(model's logits, teacher's logits with every layer softmax) on ids [B, T] at every
// position, through linearTeacherKl where both have an output embedding, else through the logits.
torch::Tensor modelTeacherKlLoss(models::TransformerModel& model, models::TransformerModel& teacher,
                                 const torch::Tensor& ids);

}  // namespace hh::jobs

// The training jobs' checkpoint without pickles: one safetensors file (written by the project's
// own writer: temporary file, fsync, rename) that holds, for the optimizer's parameters in order,
//   "param.<i>"                 the parameter's value
//   "adamw.exp_avg.<i>"         AdamW first moment         (absent while the parameter has no state)
//   "adamw.exp_avg_sq.<i>"      AdamW second moment
//   "adamw.max_exp_avg_sq.<i>"  with amsgrad only
//   "adamw.step"                I64 [n]: AdamW's step count per parameter (-1 = no state yet)
//   "extra.<name>"              tensors the job keeps besides (e.g. distill's best feature maps)
// and in its metadata the job's counters ("hedgehog_checkpoint": JSON object, e.g. step,
// best_loss) and the parameter group settings ("adamw_groups": JSON array of {lr, betas, eps,
// weight_decay, amsgrad, params}). Values, moments and steps come back bit for bit, so a resumed
// run repeats an uninterrupted one. Being one file renamed into place, a kill at any instant
// leaves either the previous checkpoint or the new one: weights, optimizer and counters always
// belong to the same step. The counters are also written to a readable `<name>.json` beside it
// (a copy for people and tools; resume reads the safetensors file only).
// Loading validates the format tag, the parameter count and every name and shape against the
// live parameters; every problem is a std::runtime_error naming the file.
#pragma once
#include <torch/optim/adamw.h>

#include <nlohmann/json.hpp>

#include <string>

namespace hh::jobs {

// Writes the checkpoint of `optimizer` (all its parameter groups, in order) with `counters`.
void saveTrainingCheckpoint(const std::string& path, torch::optim::AdamW& optimizer, const nlohmann::json& counters,
                            const std::vector<std::pair<std::string, torch::Tensor>>& extra = {});

// Copies the saved values into the optimizer's parameters, restores AdamW's per-parameter state
// and group settings, and returns the counters; the extra tensors go to `extra` when given.
nlohmann::json loadTrainingCheckpoint(const std::string& path, torch::optim::AdamW& optimizer,
                                      std::map<std::string, torch::Tensor>* extra = nullptr);

// The counters alone (the "hedgehog_checkpoint" metadata), for checks made before anything is
// loaded; the same errors as loadTrainingCheckpoint for a file that is not a checkpoint.
nlohmann::json readTrainingCheckpointCounters(const std::string& path);

// counters[key] as a number; JSON has no NaN or infinity (they are written as null), so a
// non-number reads as `ifNotNumber`.
double counterNumber(const nlohmann::json& counters, const char* key, double ifNotNumber);

// Refuses a run folder that holds only an old pickle checkpoint (checkpoint.pt): it is never
// loaded, and silently starting over would surprise the user who asked to resume.
void refuseLegacyCheckpoint(const std::string& runDir, const std::string& checkpointPath);

}  // namespace hh::jobs

// Where each variant of an experiment stands, read from its folder while the experiment runs (in
// this process, another, or none): `hedgehog experiment --config FILE --status`.
//   completed, failed, cancelled   its record (variant.json) for the variant's current config
//   running                        no record, and a process writes its newest run file now
//   paused                         running, and its run's log ends in a pause ("paused at step N",
//                                  not yet resumed: SIGUSR1, the workbench's Pause)
//   interrupted                    no record, and its newest run file says running with no writer
//                                  (a killed job; --resume continues it from its checkpoint)
//   not started                    neither (or only run files of another config, which a run
//                                  starts afresh)
// The step is the newest run file's last step written (of the job that file is: a convert
// variant's stage), out of that job's `steps` when its config has them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/experiment_config.h"

namespace hh::jobs {

struct VariantState {
  std::string name;
  std::string state;        // see above
  std::string message;      // the record's (why it failed or was cancelled)
  double seconds = 0;       // the record's wall time
  std::string runFile;      // the newest run file ("" when none)
  std::string kind;         // its job: train, distill, finetune, evaluate, convert
  int64_t step = -1;        // its last step written (-1: none yet)
  int64_t totalSteps = -1;  // its job's steps (-1: not in its config)
};

// Every variant of `config`, in its order.
std::vector<VariantState> variantStates(const ExperimentConfig& config);

}  // namespace hh::jobs

// The whole conversion in one job (`hedgehog convert`, the workbench's Convert button):
//   1. distill   stage 1 on the teacher: feature maps trained to match softmax (distill_job.h)
//   2. finetune  stage 2 on teacher + adapters: task loss, full or LoRA (finetune_job.h);
//                skipped when finetune.steps is 0 (the converted model is teacher + adapters)
//   3. evaluate  original vs converted perplexity (or accuracy) and the per-head KL table of the
//                chosen feature maps against softmax (evaluate_job.h)
//   4. export    the converted model as a Hugging Face-style folder (float32/float16/bfloat16), or
//                the adapters alone
// Layout under run_dir:
//   run.h5                   kind "convert": per-stage seconds, the headline metrics, log lines
//                            naming each stage's run file, the export path (setFinal)
//   distill/run.h5, distill/adapters.safetensors
//   finetune/run.h5, finetune/model/
//   evaluate/run.h5
//   model/ (or output_dir)   the exported model (or adapters.safetensors with adapters_only)
// The keys every stage shares (model, feature map, rule, layers, data, seed) are set once at the
// top of the project file; each stage's own section takes the rest of that job's keys.
#pragma once
#include <string>

#include "engine/config/convert_config.h"
#include "engine/jobs/distill_job.h"
#include "engine/jobs/evaluate_job.h"
#include "engine/jobs/finetune_job.h"

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {


struct ConvertResult {
  JobStatus status = JobStatus::Completed;
  std::string message;
  std::string failedStage;  // the stage that failed or was cancelled
  DistillResult distill;
  FinetuneResult finetune;  // steps == 0 when skipped
  EvaluateResult evaluate;
  std::string runFile;      // <run_dir>/run.h5
  std::string device;       // where it computed: "cpu", "cuda:0 (NAME)", with ", bfloat16" in bf16 (engine/core/device.h)
  std::string exportPath;   // the exported folder (or adapters file)
  double seconds = 0;
};

// Runs the stages on the calling thread. Throws only for bad configuration (before the run file
// exists); a stage that fails or is cancelled stops the job and is reported in the result.
// `world` (engine/distributed/communicator.h): null trains alone. With several processes the
// distill and finetune stages run data-parallel on every rank; rank 0 alone writes the convert
// run file, evaluates and exports, and the other ranks return after finetuning. run_dir must be
// on storage every rank sees (finetuning reads the adapters rank 0 saved).
ConvertResult runConvert(const ConvertConfig& config, JobObserver& observer, dist::Communicator* world = nullptr);

// Throws std::invalid_argument when `outputFolder` is the model folder itself: an export there
// would replace the weights it reads.
void refuseExportIntoModelFolder(const std::string& outputFolder, const std::string& modelDir);

// Writes the converted model `source` (a converted folder, or the teacher `modelDir` + an adapters
// file) to `output` per `options`; returns the written path (the folder, or the adapters file).
std::string exportConverted(const std::string& modelDir, const std::string& adapters, const std::string& output,
                            const ExportConfig& options);

}  // namespace hh::jobs

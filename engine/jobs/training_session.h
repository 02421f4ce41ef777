// The training loop that distill, finetune and train share; each job keeps only what is its own
// (model, data, the loss of a batch, its evaluation, what it saves). A session owns:
//   - the run folder, the checkpoint path (<run_dir>/checkpoint.safetensors, training_checkpoint.h)
//     and the step counter with the early-stopping counters, saved in and restored from it, with
//     how the run ended ("ended": "completed" | "early-stopped") and an evaluation a cancel or an
//     error interrupted ("pending_evaluation_loss": the step's loss), which a resume performs
//     first. No checkpoint is written at step 0 (nothing trained: a resume starts afresh), and a
//     run from step 0 deletes an earlier run's checkpoint before it writes anything, so that a
//     resume never continues another run;
//   - the run file, created by rank 0 only: <run_dir>/run.h5, or run-resumed-<step>.h5 beside an
//     existing one when a resume was asked (the old file is kept);
//   - log lines and scalars, to the run file (rank 0) and the observer;
//   - the step loop (train): the learning rate of the schedule, cancel agreed by every rank at each
//     step's start, one step of the job, and a loss or gradient norm that is not finite ends the
//     job as failed *before* the optimizer's update, so the weights stay those of the last step;
//     then the update, the step's scalars, and every `evalEvery` steps and at the last one the
//     job's evaluation, early stopping (no gain of more than 1e-6 in validation loss for
//     `patience` evaluations), the run file flushed and then the checkpoint saved (so the file
//     holds every step a resume can continue from);
//   - the ending: cancelled ("cancelled at step N"); with several processes a lost peer ends the
//     job as failed; on rank 0 the job's last work (final evaluation, saving) where an error
//     fails a completed job, the closing message and status row, and the closed run file.
#pragma once
#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/jobs/job_observer.h"
#include "engine/runs/run_writer.h"

namespace torch::optim {
class Optimizer;
class AdamW;
}  // namespace torch::optim

namespace hh::dist {
class Communicator;
}

namespace hh::jobs {

// Early stopping on the validation loss.
struct EarlyStopping {
  int64_t patience = 0;  // evaluations without a gain before stopping (0 = never)
  double bestLoss = std::numeric_limits<double>::infinity();
  int64_t bestStep = 0;
  int64_t evalsWithoutGain = 0;
  // Records the validation loss of `step`; true when it beats the best by more than 1e-6.
  bool observe(double loss, int64_t step);
  bool exhausted() const { return patience > 0 && evalsWithoutGain >= patience; }
};

// The learning rate over the steps: linear warmup, then cosine decay to lr * minLrRatio
// (scheduledLr, training_support.h). The defaults keep it constant.
struct LrSchedule {
  double lr = 1e-3;
  int64_t warmupSteps = 0;
  double minLrRatio = 1.0;
};

// One step of a job (the forward pass, backward pass, gradient exchange and clipping of one
// global batch, not the update), as the loop needs it.
struct StepReport {
  double loss = 0;                        // over the global batch
  double gradNorm = 0;                    // before clipping (0 for a job that does not clip)
  int64_t tokens = 0;                     // tokens in this rank's batch (for tokens_per_second)
  std::map<std::string, double> scalars;  // written at the new step besides loss and lr
};

struct TrainingHooks {
  // Before the first step, inside the loop's cancel and failure handling: the job's evaluation of
  // where it starts (optional).
  std::function<void()> start;
  // Step `step` (0-based: the step about to be taken) at learning rate `lr`.
  std::function<StepReport(int64_t step, double lr)> step;
  // The evaluation after `step` steps, the last step's loss given: its scalars, "val_loss" among
  // them (early stopping reads it), which the loop records; `logLine` gets the log line.
  std::function<std::map<std::string, double>(int64_t step, double loss, std::string& logLine)> evaluate;
  std::function<void(int64_t step)> improved;  // the validation loss beat the best (optional)
  std::function<void()> saveCheckpoint;        // rank 0: after each evaluation and at the end
  // What the message of a step that is not finite ends with, e.g. " (try a lower lr)", and what
  // the job keeps then ("the weights", "the feature maps").
  std::string failureHint;
  std::string kept = "the weights";
  // Whether the job ends with the best evaluation's weights (distillation's feature maps) rather
  // than the last step's: the failure messages then name the best step.
  bool keepsBest = false;
  // Whether the loop adds the step's wall time (the step and the update) as "step_seconds", and
  // its tokens over that time as "tokens_per_second", to each step's scalars.
  bool stepSeconds = false, tokensPerSecond = false;
};

class TrainingSession {
 public:
  // kind: the run file's kind ("distill", "finetune", "train"); `world` may be a world of one.
  TrainingSession(std::string kind, const std::string& runDir, JobObserver& observer, dist::Communicator& world);

  dist::Communicator& world() { return world_; }
  bool main() const;
  JobObserver& observer() { return observer_; }
  const std::string& runDir() const { return runDir_; }
  const std::string& checkpointFile() const { return checkpointFile_; }

  // Whether this run continues an earlier one: a resume was asked and its checkpoint is there,
  // past step 0 (a folder with only an old pickle checkpoint is refused: refuseLegacyCheckpoint).
  bool resuming(bool resumeAsked);
  // The counters of the checkpoint resuming() found (an empty object when it found none): a job
  // checks what it may continue from these before loadCheckpoint, without reading the file again.
  const nlohmann::json& resumeCounters() const { return resumeCounters_; }
  // Restores the optimizer, the step and the early-stopping counters from the checkpoint and
  // returns every counter saved (the job's own included); `extra` gets the extra tensors.
  nlohmann::json loadCheckpoint(torch::optim::AdamW& optimizer, std::map<std::string, at::Tensor>* extra = nullptr);
  // After loadCheckpoint, on every rank (it is a collective): true when the checkpoint's run has
  // nothing left to train (`steps` steps done, or early stopping ended it) and its end is recorded
  // (the folder's last run file says completed). message() then says so in one line, runFile()
  // is that file, and the job returns as completed without writing anything. With its end not
  // recorded (a kill or an error in its final save) the job redoes that end without training.
  bool alreadyEnded(int64_t steps);
  // Rank 0, past step 0: saves the optimizer, the step, the early-stopping counters, how the run
  // ended or the evaluation it owes, and the job's `counters`.
  void saveCheckpoint(torch::optim::AdamW& optimizer, nlohmann::json counters,
                      const std::vector<std::pair<std::string, at::Tensor>>& extra = {});

  // Rank 0 creates the run file (see above) and tells the observer; the path is runFile().
  void open(runs::RunHeader header, bool resumeAsked, int64_t totalSteps);
  const std::string& runFile() const { return runFile_; }
  runs::RunWriter* writer() { return writer_ ? &*writer_ : nullptr; }

  void log(const std::string& line);  // at the current step
  void record(int64_t step, const std::map<std::string, double>& scalars);

  // The step loop up to `steps` (see above), then status() and message() say how it ended.
  void train(torch::optim::Optimizer& optimizer, const LrSchedule& schedule, int64_t steps, int64_t evalEvery,
             const std::string& phase, const TrainingHooks& hooks);

  // After train(): false on ranks other than 0 (message "<status> on rank K: <why>", with
  // kFailedOnEveryRank after the rank for a failure every rank agreed on; they are done). On
  // rank 0: `evaluateLast` (optional), the run file flushed, the checkpoint saved, `saveLast`
  // (optional: the model or adapters); an exception there fails a job that had completed. Then
  // the run file records `final` (setFinal), `summary()` becomes the message when nothing set one,
  // and the status row is written and the file closed.
  bool finish(const std::function<void()>& evaluateLast, const std::function<void()>& saveLast,
              const std::string& final, const std::function<std::string()>& summary);

  int64_t step = 0;  // optimizer steps done
  EarlyStopping stopping;
  JobStatus status() const { return status_; }
  const std::string& message() const { return message_; }
  void fail(const std::string& message);
  // Whether the job failed on a value every rank has (the loss or gradient norm of a step and the
  // validation loss are exchanged): every rank stops at the same step, and rank 0 then saves.
  bool failedOnEveryRank() const { return status_ == JobStatus::Failed && everyRank_; }
  double seconds() const;  // since the session began, time spent paused excluded

 private:
  bool passStepGate();                                 // false: cancelled (every rank at this step); waits while paused
  int64_t keptStep(const TrainingHooks& hooks) const;  // the step whose weights a failed job keeps
  // The evaluation after this step, then the checkpoint; false when the job stops here (a
  // validation loss that is not finite, or early stopping).
  bool evaluateAndSave(double loss, const TrainingHooks& hooks);
  void removeEarlierCheckpoint();
  std::string kind_, runDir_, checkpointFile_, runFile_;
  nlohmann::json resumeCounters_ = nlohmann::json::object();  // resuming()'s read of the checkpoint
  bool loaded_ = false;  // loadCheckpoint ran: this run continues the checkpoint's
  std::string ending_;   // "early-stopped" or "completed" once the run has ended
  // The loss of the step whose evaluation is under way, or a cancel interrupted (a resume does it).
  std::optional<double> pendingEvaluation_;
  JobObserver& observer_;
  dist::Communicator& world_;
  std::optional<runs::RunWriter> writer_;
  std::function<void()> saveJobCheckpoint_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  double pausedSeconds_ = 0;
  JobStatus status_ = JobStatus::Completed;
  std::string message_;
  bool everyRank_ = false;  // see failedOnEveryRank()
};

// What the message of a rank > 0 that failed with every rank holds after "failed on rank K": the
// launcher (app/cli/rank_processes.cpp) then leaves rank 0 to finish its save, as after a cancel.
inline constexpr const char* kFailedOnEveryRank = ", as on every rank";

// How the run's log begins the lines of a pause at the step gate ("paused at step N", then
// "resumed at step N after S s" or "cancelled while paused at step N after S s"); what
// `experiment --status` reads back (experiment_status.cpp).
inline constexpr const char* kPausedAtStep = "paused at step ";
inline constexpr const char* kResumedAtStep = "resumed at step ";
inline constexpr const char* kCancelledWhilePaused = "cancelled while paused at step ";

// What a job's result takes from its session after finish(): status, message, steps, the best step
// and validation loss, the wall time, and the run file (empty where `main` is false: ranks other
// than 0). Every training job's result has these fields.
template <class Result>
void takeSessionEnding(Result& result, const TrainingSession& session, bool main) {
  result.status = session.status();
  result.message = session.message();
  result.steps = session.step;
  result.bestStep = session.stopping.bestStep;
  result.bestValidationLoss = session.stopping.bestLoss;
  result.runFile = main ? session.runFile() : std::string();
  result.seconds = session.seconds();
}

// "A -> B" with `format` writing each value, or "B" alone where A was not measured (NaN).
std::string changeText(double from, double to, const std::function<std::string(double)>& format);

// "the loss became NaN at step 13; kept the weights of step 12 (try a lower lr)"
std::string nonFiniteStepMessage(double loss, double gradNorm, int64_t step, const std::string& kept, int64_t keptStep,
                                 const std::string& hint);
// "the validation loss became NaN at step 20; kept the feature maps of step 10 (...)"
std::string nonFiniteValidationMessage(double loss, int64_t step, const std::string& kept, int64_t keptStep,
                                       const std::string& hint);

}  // namespace hh::jobs

// The shared training loop (see training_session.h).
#include "engine/jobs/training_session.h"

#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/core/error_text.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/step_gate.h"
#include "engine/jobs/job_support.h"
#include "engine/jobs/training_checkpoint.h"
#include "engine/jobs/training_support.h"
#include "engine/runs/run_chain.h"

namespace hh::jobs {
namespace fs = std::filesystem;

namespace {

constexpr const char* kEarlyStopped = "early-stopped";

// Whether `file` (a run file) says completed (false when it does not open), and its message.
bool saysCompleted(const std::string& file, std::string& message) {
  try {
    const auto reader = runs::RunReader::open(file);
    message = reader.statusMessage();
    return reader.status() == runs::RunStatus::Completed;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string changeText(double from, double to, const std::function<std::string(double)>& format) {
  return std::isnan(from) ? format(to) : format(from) + " -> " + format(to);
}

bool EarlyStopping::observe(double loss, int64_t step) {
  if (loss < bestLoss - 1e-6) {
    bestLoss = loss;
    bestStep = step;
    evalsWithoutGain = 0;
    return true;
  }
  ++evalsWithoutGain;
  return false;
}

std::string nonFiniteStepMessage(double loss, double gradNorm, int64_t step, const std::string& kept, int64_t keptStep,
                                 const std::string& hint) {
  const bool lossBad = !std::isfinite(loss);
  const double value = lossBad ? loss : gradNorm;
  return std::string(lossBad ? "the loss" : "the gradient norm") + " became " +
         (std::isnan(value) ? "NaN" : "infinite") + " at step " + std::to_string(step + 1) + "; kept " + kept +
         " of step " + std::to_string(keptStep) + hint;
}

std::string nonFiniteValidationMessage(double loss, int64_t step, const std::string& kept, int64_t keptStep,
                                       const std::string& hint) {
  return std::string("the validation loss became ") + (std::isnan(loss) ? "NaN" : "infinite") + " at step " +
         std::to_string(step) + "; kept " + kept + " of step " + std::to_string(keptStep) + hint;
}

TrainingSession::TrainingSession(std::string kind, const std::string& runDir, JobObserver& observer,
                                 dist::Communicator& world)
    : kind_(std::move(kind)), runDir_(runDir), observer_(observer), world_(world) {
  if (runDir.empty()) throw std::invalid_argument(kind_ + ": run_dir is empty");
  fs::create_directories(runDir);
  // Weights, optimizer state and counters in one file (training_checkpoint.h): never a pickle.
  checkpointFile_ = (fs::path(runDir) / "checkpoint.safetensors").string();
  runFile_ = (fs::path(runDir) / "run.h5").string();
}

bool TrainingSession::main() const {
  return world_.isMain();
}

bool TrainingSession::resuming(bool resumeAsked) {
  if (!resumeAsked) return false;
  refuseLegacyCheckpoint(runDir_, checkpointFile_);
  // A checkpoint at step 0 (older builds wrote one after a cancel in the starting evaluation)
  // holds nothing trained, and the job would skip that evaluation: the run starts afresh.
  if (!fs::exists(checkpointFile_)) return false;
  resumeCounters_ = readTrainingCheckpointCounters(checkpointFile_);
  return resumeCounters_.at("step").get<int64_t>() > 0;
}

nlohmann::json TrainingSession::loadCheckpoint(torch::optim::AdamW& optimizer,
                                               std::map<std::string, at::Tensor>* extra) {
  auto counters = loadTrainingCheckpoint(checkpointFile_, optimizer, extra);
  step = counters.at("step");
  stopping.bestStep = counters.at("best_step");
  stopping.bestLoss = counterNumber(counters, "best_loss", std::numeric_limits<double>::infinity());
  stopping.evalsWithoutGain = counters.at("evals_without_gain");
  loaded_ = true;
  // "completed" is not taken over: a run given more steps continues, and its end sets it again.
  // Early stopping ended it only while it still would: a resume with a larger patience, or none
  // (0), trains on.
  if (counters.value("ended", std::string()) == kEarlyStopped && stopping.exhausted()) ending_ = kEarlyStopped;
  if (counters.contains("pending_evaluation_loss"))
    pendingEvaluation_ = counterNumber(counters, "pending_evaluation_loss", kNaN);
  return counters;
}

bool TrainingSession::alreadyEnded(int64_t steps) {
  if (!loaded_ || (step < steps && ending_ != kEarlyStopped)) return false;
  std::string last, recorded;
  if (main()) {
    const auto chain = runs::runChain(runDir_);
    if (!chain.empty() && saysCompleted(chain.back(), recorded)) last = chain.back();
  }
  if (!world_.any(!last.empty())) return false;  // its end was cut short: the job does it again
  if (main()) runFile_ = last;
  const std::string at = " at step " + std::to_string(step);
  const int64_t evals = stopping.evalsWithoutGain;
  // The run's own end message first (an experiment's record of the variant keeps what it measured).
  message_ =
      (recorded.empty() ? "" : recorded + "; ") +
      (ending_ == kEarlyStopped
           ? runDir_ + " already stopped early" + at + " (no validation gain in " + std::to_string(evals) +
                 (evals == 1 ? " evaluation" : " evaluations") + "; best step " + std::to_string(stopping.bestStep) +
                 "): nothing to resume (raise patience, or set it to 0, to train on; or start afresh "
                 "without --resume)"
           : runDir_ + " already completed" + at + ": nothing to resume (raise steps above " + std::to_string(step) +
                 " to continue it, or start afresh without --resume)");
  return true;
}

void TrainingSession::saveCheckpoint(torch::optim::AdamW& optimizer, nlohmann::json counters,
                                     const std::vector<std::pair<std::string, at::Tensor>>& extra) {
  if (!main() || step == 0) return;  // nothing trained yet: a resume starts afresh
  counters["step"] = step;
  counters["best_step"] = stopping.bestStep;
  counters["best_loss"] = stopping.bestLoss;
  counters["evals_without_gain"] = stopping.evalsWithoutGain;
  if (!ending_.empty()) counters["ended"] = ending_;
  if (pendingEvaluation_) counters["pending_evaluation_loss"] = *pendingEvaluation_;
  saveTrainingCheckpoint(checkpointFile_, optimizer, counters, extra);
}

void TrainingSession::open(runs::RunHeader header, bool resumeAsked, int64_t totalSteps) {
  // A checkpoint was loaded: keep the old file and write a continuation beside it. A run from
  // step 0 writes run.h5 afresh, and an earlier run's continuations go (runChain would join them).
  const bool continues = resumeAsked && step > 0 && fs::exists(runFile_);
  if (continues) runFile_ = (fs::path(runDir_) / ("run-resumed-" + std::to_string(step) + ".h5")).string();
  if (!main()) return;
  if (!loaded_) removeEarlierCheckpoint();
  runs::removeContinuations(runDir_, continues ? step + 1 : 1);
  header.runId = makeRunId(kind_);
  header.kind = kind_;
  runs::RunWriterOptions options;
  options.overwrite = true;
  writer_ = runs::RunWriter::create(runFile_, header, options);
  observer_.started(runFile_, totalSteps);
}

// A run from step 0: an earlier run's checkpoint goes before this run writes anything, or a resume
// after a kill before this run's first checkpoint would continue that other run.
void TrainingSession::removeEarlierCheckpoint() {
  for (const auto& path : {checkpointFile_, fs::path(checkpointFile_).replace_extension(".json").string()}) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) continue;  // no checkpoint: the save fails on it, naming it
    fs::remove(path, ec);
    if (ec)
      throw std::runtime_error(kind_ + ": cannot delete the earlier run's checkpoint " + path + " (" + ec.message() +
                               "); a resume would continue that run");
  }
}

void TrainingSession::log(const std::string& line) {
  if (writer_) writer_->log(line, step);
  observer_.log(line);
}

void TrainingSession::record(int64_t at, const std::map<std::string, double>& scalars) {
  if (writer_) writer_->appendScalars(at, scalars);
  observer_.scalars(at, scalars);
}

void TrainingSession::fail(const std::string& message) {
  status_ = JobStatus::Failed;
  message_ = message;
}

// Cancel and pause at the start of a step, agreed by every rank; the run's log says when it
// waited and for how long.
bool TrainingSession::passStepGate() {
  auto waitStarted = std::chrono::steady_clock::now();
  dist::StepControl control;
  control.cancelled = [this] { return observer_.cancelRequested(); };
  control.pauseRequested = [this] { return observer_.pauseRequested(); };
  control.pausedChanged = [this, &waitStarted](bool paused, bool cancelled) {
    if (paused)
      waitStarted = std::chrono::steady_clock::now();
    else
      pausedSeconds_ += secondsSince(waitStarted);
    char line[96];
    if (paused)
      std::snprintf(line, sizeof line, "%s%lld", kPausedAtStep, static_cast<long long>(step));
    else
      std::snprintf(line, sizeof line, "%s%lld after %.1f s", cancelled ? kCancelledWhilePaused : kResumedAtStep,
                    static_cast<long long>(step), secondsSince(waitStarted));
    log(line);
    if (paused && writer_) writer_->flush();  // readers see every step up to the pause, and this line
    observer_.paused(paused, step);
  };
  return dist::passStepGate(world_, control);
}

double TrainingSession::seconds() const {
  return secondsSince(started_) - pausedSeconds_;
}

void TrainingSession::train(torch::optim::Optimizer& optimizer, const LrSchedule& schedule, int64_t steps,
                            int64_t evalEvery, const std::string& phase, const TrainingHooks& hooks) {
  saveJobCheckpoint_ = hooks.saveCheckpoint;
  try {
    if (hooks.start) hooks.start();
    // The starting evaluation failed: its validation loss is exchanged, so on every rank.
    if (status_ == JobStatus::Failed) {
      everyRank_ = true;
      return;
    }
    // The evaluation a cancel (or an error) interrupted, as the interrupted run would have done it.
    if (pendingEvaluation_ && !evaluateAndSave(*pendingEvaluation_, hooks)) return;
    while (step < steps && ending_ != kEarlyStopped) {
      if (!passStepGate()) throw JobCancelled();  // every rank stops (or waits) at the same step
      const auto started = std::chrono::steady_clock::now();
      const double lr = scheduledLr(schedule.lr, step, schedule.warmupSteps, steps, schedule.minLrRatio);
      setLr(optimizer, lr);
      StepReport report = hooks.step(step, lr);
      if (!std::isfinite(report.loss) || !std::isfinite(report.gradNorm)) {
        fail(nonFiniteStepMessage(report.loss, report.gradNorm, step, hooks.kept, keptStep(hooks), hooks.failureHint));
        everyRank_ = true;  // the loss and the norm are those of the global batch
        break;
      }
      optimizer.step();
      ++step;
      const double seconds = secondsSince(started);
      report.scalars["loss"] = report.loss;
      report.scalars["lr"] = lr;
      if (hooks.stepSeconds) report.scalars["step_seconds"] = seconds;
      if (hooks.tokensPerSecond) report.scalars["tokens_per_second"] = double(report.tokens) / std::max(seconds, 1e-9);
      record(step, report.scalars);
      observer_.progress(step, steps, phase);
      if (step % evalEvery != 0 && step != steps) continue;
      if (!evaluateAndSave(report.loss, hooks)) break;
    }
  } catch (const JobCancelled&) {
    status_ = JobStatus::Cancelled;
    message_ = "cancelled at step " + std::to_string(step);
  } catch (const std::exception& e) {
    // A Torch error (out of memory, a bad shape), a checkpoint that cannot be written, or with
    // several processes a lost or timed-out peer: the job keeps its last step's weights and
    // (rank 0) closes the run file as failed with the reason, instead of leaving it "running".
    fail(errorText(e) + " (at step " + std::to_string(step + 1) + ")");
  }
}

bool TrainingSession::evaluateAndSave(double loss, const TrainingHooks& hooks) {
  std::string line;
  pendingEvaluation_ = loss;  // a checkpoint saved after a cancel inside the evaluation owes it
  const auto scalars = hooks.evaluate(step, loss, line);
  pendingEvaluation_.reset();
  record(step, scalars);
  log(line);
  const double validationLoss = scalars.at("val_loss");
  if (!std::isfinite(validationLoss)) {
    fail(nonFiniteValidationMessage(validationLoss, step, hooks.kept, keptStep(hooks), hooks.failureHint));
    everyRank_ = true;  // the sum over every rank's rows
    return false;
  }
  if (stopping.observe(validationLoss, step) && hooks.improved) hooks.improved(step);
  if (stopping.exhausted()) ending_ = kEarlyStopped;  // the checkpoint records it: a resume does not train on
  // Rows first: the run file then always holds every step up to the checkpoint's, which a
  // resume continues from (its continuation file starts at the next step).
  if (writer_) writer_->flush();
  if (main()) hooks.saveCheckpoint();
  if (ending_ == kEarlyStopped) {
    log("early stop: no validation gain in " + std::to_string(stopping.patience) + " evaluations");
    return false;
  }
  return true;
}

int64_t TrainingSession::keptStep(const TrainingHooks& hooks) const {
  return hooks.keepsBest && stopping.bestStep > 0 ? stopping.bestStep : step;
}

bool TrainingSession::finish(const std::function<void()>& evaluateLast, const std::function<void()>& saveLast,
                             const std::string& final, const std::function<std::string()>& summary) {
  if (!main()) {  // the other ranks are done: rank 0 evaluates and writes the results
    // The reason stays: the launcher relays it when this rank is the one that failed first.
    message_ = std::string(toString(status_)) + " on rank " + std::to_string(world_.rank()) +
               (failedOnEveryRank() ? kFailedOnEveryRank : "") + (message_.empty() ? "" : ": " + message_);
    return false;
  }
  try {
    if (evaluateLast) evaluateLast();
    if (status_ == JobStatus::Completed && ending_.empty()) ending_ = "completed";
    writer_->flush();
    if (saveJobCheckpoint_) saveJobCheckpoint_();
    if (saveLast) saveLast();
    writer_->setFinal(final, step);
  } catch (const std::exception& e) {
    if (status_ == JobStatus::Completed) fail(errorText(e));
  }
  if (message_.empty()) message_ = summary();
  finishRun(*writer_, observer_, status_, message_, step);
  return true;
}

}  // namespace hh::jobs

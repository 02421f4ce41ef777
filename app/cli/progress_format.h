// How the CLI reports a running job on stdout, chosen with the global `--progress` option:
//   auto   (default) bar on a terminal, plain otherwise
//   bar    a redrawn progress bar with ETA and the live loss
//   plain  timestamped lines every 5 s (HH_PROGRESS_SECONDS sets the interval)
//   jsonl  one JSON object per line and per event, for programs (the workbench follows a
//          multi-process conversion this way). Every line on stdout is then an object with an
//          "event" key; errors stay one line on stderr ("hedgehog: error: ..."), as in every mode.
// The events (seconds are wall seconds since the job started; eta_s is null until known):
//   {"event":"run_file","path":P,"total_steps":N}               a stage's run file exists
//   {"event":"progress","step":S,"total":T,"phase":X,"elapsed_s":E,"eta_s":R}
//   {"event":"scalars","step":S,"values":{"loss":..,...}}
//   {"event":"log","line":L}
//   {"event":"paused","paused":true|false,"step":S}  training waits at step S (SIGUSR1), goes on (SIGUSR2)
//   {"event":"processes","count":N,"pids":[..],"rendezvous":R,"threads":K,"logs":D}
//      (R: "file RUN_DIR/.rendezvous-PID", or "host:port" when MASTER_ADDR/MASTER_PORT are set)
//   {"event":"memory","rank":R,"peak_mb":M}
//   {"event":"end","status":"completed|failed|cancelled","message":M,"seconds":S,"steps":N,
//    "run_file":P,"outputs":{"model"|"adapters"|"export":P},"evaluation":{..},"stages":{..}}
// "end" is the job's result; only "memory" (distill, finetune, convert) may follow it. "steps",
// "outputs", "evaluation" and "stages" appear where the job has them; experiment's end has
// "outputs":{"summary","summary_csv"} and "variants" (summary.json's list) (docs/jobs.md,
// "Progress for programs").
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace hh::cli {

enum class ProgressFormat { Auto, Bar, Plain, Jsonl };

// Set once by main() from --progress ("auto", "bar", "plain", "jsonl"); throws on another value.
void setProgressFormat(const std::string& name);
ProgressFormat progressFormat();
inline bool jsonlProgress() { return progressFormat() == ProgressFormat::Jsonl; }

// Writes `event` as one line on stdout and flushes (safe from any thread).
void emitEvent(const nlohmann::json& event);

// A line for people on stdout: as it is, or as a "log" event in jsonl mode.
void sayLine(const std::string& line);

}  // namespace hh::cli

// Where the engine's modules draw their random initial values from (a model trained from
// scratch, a gated rule's projections and gate biases).
//
// A job draws from a generator of its own, seeded from its config and installed for the thread
// that runs it. Another thread building modules meanwhile (the workbench's GUI thread opening a
// model or sizing adapters while a job runs) draws from Torch's global generator, so it neither
// takes values out of the job's sequence nor shifts it: a run is the same from its seed whatever
// else the process does. Outside any SeededInitialValues the draws come from Torch's global
// generator, as Torch's own module constructors' do.
#pragma once
#include <ATen/core/Generator.h>

#include <cstdint>

namespace hh::attn {

// The calling thread's generator for initial values: the innermost SeededInitialValues alive on
// this thread, else Torch's global CPU generator.
at::Generator initialValuesGenerator();

// Installs a CPU generator seeded with `seed` for the calling thread while it lives (scopes nest;
// the previous one comes back at destruction). Create and destroy it on the same thread.
class SeededInitialValues {
 public:
  explicit SeededInitialValues(uint64_t seed);
  ~SeededInitialValues();
  SeededInitialValues(const SeededInitialValues&) = delete;
  SeededInitialValues& operator=(const SeededInitialValues&) = delete;

 private:
  at::Generator generator_;
  const at::Generator* previous_;
};

}  // namespace hh::attn

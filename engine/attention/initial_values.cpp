#include "engine/attention/initial_values.h"

#include <ATen/CPUGeneratorImpl.h>

namespace hh::attn {

namespace {
thread_local const at::Generator* threadGenerator = nullptr;
}

at::Generator initialValuesGenerator() {
  return threadGenerator ? *threadGenerator : at::detail::getDefaultCPUGenerator();
}

SeededInitialValues::SeededInitialValues(uint64_t seed)
    : generator_(at::detail::createCPUGenerator(seed)), previous_(threadGenerator) {
  threadGenerator = &generator_;
}

SeededInitialValues::~SeededInitialValues() { threadGenerator = previous_; }

}  // namespace hh::attn

// Precompiled header for engine/ (and targets that reuse it): Torch dominates compile time.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

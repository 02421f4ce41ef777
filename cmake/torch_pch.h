// The Torch API the project's Torch sources use, precompiled once (cmake/HedgehogPch.cmake) and
// reused by every target that has such sources. Only what some source includes itself belongs
// here: a source that needs none of it skips the precompiled header.
#pragma once
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

/// Umbrella header of ember's optimizers over row-sparse and dense embedding gradients: SGD,
/// lazy Adam / AdamW and row-wise Adagrad, plus gradient clipping by global norm.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/optim/adagrad.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/clip.hpp"
#include "ember/optim/sgd.hpp"

/// ClipGroup<T>, gradient clipping by global norm: it lives with the optimizers
/// (ember/optim/clip.hpp); this header keeps `#include <ember/clip.hpp>` working.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/optim/clip.hpp"

// Every sparse optimizer of ember/optim.hpp in the configurations that keep different per-row
// state, each in its own Catch2 SECTION: for tests that must hold for all of them (the reset of
// a keyed table's reused rows).
// SPDX-License-Identifier: MIT
#pragma once

#include <catch2/catch.hpp>

#include <ember/optim.hpp>

namespace ember_test {

/// Calls check(optimizer) once per configuration, inside a SECTION named after it.
template <class F>
void for_each_sparse_optimizer(F&& check) {
  using ember::optim::Adam;
  using ember::optim::RowwiseAdagrad;
  using ember::optim::SGD;
  SECTION("plain SGD") { check(SGD<float>({.lr = 0.1})); }
  SECTION("SGD with momentum") { check(SGD<float>({.lr = 0.1, .momentum = 0.9})); }
  SECTION("SGD, Nesterov and weight decay") {
    check(SGD<float>({.lr = 0.1, .momentum = 0.5, .weight_decay = 0.01, .nesterov = true}));
  }
  SECTION("Adam") { check(Adam<float>({.lr = 0.05})); }
  SECTION("Adam with L2 weight decay") { check(Adam<float>({.lr = 0.05, .weight_decay = 0.01})); }
  SECTION("AdamW with per-row steps") {
    check(Adam<float>({.lr = 0.05, .weight_decay = 0.1, .decoupled = true, .per_row_steps = true}));
  }
  SECTION("row-wise Adagrad") {
    check(RowwiseAdagrad<float>({.lr = 0.1, .initial_accumulator_value = 0.1}));
  }
}

}  // namespace ember_test

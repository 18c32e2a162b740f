// Checks of the errors ember throws (errors.hpp): catch an exception to inspect its fields, and
// the ShapeError a backward raises for a grad_out of the wrong width.
// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include <ember/errors.hpp>
#include <ember/types.hpp>

namespace ember_test {

/// Runs f and returns the exception of type E it throws (empty if it throws nothing; any other
/// exception propagates and fails the test). Lets a test inspect an exception's fields.
template <class E, class F>
std::optional<E> catch_as(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  }
  return std::nullopt;
}

/// Runs `call`, a backward given a grad_out of the wrong width, and checks the ShapeError it must
/// throw (message, dimension 1, expected and actual widths) and that `grad` - empty before - is
/// still empty and unbound, so a later call with the right width binds it to the table.
template <class Grad, class F>
void check_grad_out_width_refused(F&& call, const std::string& message, ember::Index expected,
                                  ember::Index actual, const Grad& grad) {
  const auto e = catch_as<ember::ShapeError>(std::forward<F>(call));
  REQUIRE(e);
  CHECK(std::string(e->what()) == message);
  CHECK(e->dimension() == 1);
  CHECK(e->expected() == expected);
  CHECK(e->actual() == actual);
  CHECK(grad.empty());
  CHECK(grad.d_model() == 0);
}

}  // namespace ember_test

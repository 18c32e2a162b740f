// Tests for ember/config.hpp: version macros, EMBER_ASSERT in the test build, OpenMP detection.
// SPDX-License-Identifier: MIT
#include "ember/config.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>

#ifndef EMBER_TESTING
#error "the ember test build defines EMBER_TESTING so that EMBER_ASSERT throws"
#endif

// ---- version macros ----------------------------------------------------------------------------

// Usable in #if, as users will test them.
#if !defined(EMBER_VERSION) || EMBER_VERSION < 100
#error "EMBER_VERSION must be defined and at least 0.1.0"
#endif

static_assert(EMBER_VERSION ==
              EMBER_VERSION_MAJOR * 10000 + EMBER_VERSION_MINOR * 100 + EMBER_VERSION_PATCH);
// Each component must stay below 100, or the packed number becomes ambiguous.
static_assert(EMBER_VERSION_MAJOR >= 0 && EMBER_VERSION_MAJOR < 100);
static_assert(EMBER_VERSION_MINOR >= 0 && EMBER_VERSION_MINOR < 100);
static_assert(EMBER_VERSION_PATCH >= 0 && EMBER_VERSION_PATCH < 100);
static_assert(EMBER_VERSION / 10000 == EMBER_VERSION_MAJOR);
static_assert(EMBER_VERSION / 100 % 100 == EMBER_VERSION_MINOR);
static_assert(EMBER_VERSION % 100 == EMBER_VERSION_PATCH);

// ---- OpenMP detection --------------------------------------------------------------------------

#if defined(_OPENMP)
static_assert(EMBER_HAS_OPENMP == 1);
#else
static_assert(EMBER_HAS_OPENMP == 0);
#endif

TEST_CASE("the version string parts agree with EMBER_VERSION", "[config]") {
  const std::string version = std::to_string(EMBER_VERSION_MAJOR) + "." +
                              std::to_string(EMBER_VERSION_MINOR) + "." +
                              std::to_string(EMBER_VERSION_PATCH);
  CAPTURE(version, EMBER_VERSION);
  CHECK(EMBER_VERSION ==
        EMBER_VERSION_MAJOR * 10000 + EMBER_VERSION_MINOR * 100 + EMBER_VERSION_PATCH);
  CHECK(std::string(EMBER_STRINGIFY(EMBER_VERSION_MINOR)) == std::to_string(EMBER_VERSION_MINOR));
}

TEST_CASE("EMBER_ASSERT throws std::logic_error under EMBER_TESTING", "[config]") {
  CHECK_NOTHROW(EMBER_ASSERT(1 + 1 == 2));
  CHECK_THROWS_AS(EMBER_ASSERT(1 + 1 == 3), std::logic_error);
  try {
    EMBER_ASSERT(2 < 1);
    FAIL("no throw");
  } catch (const std::logic_error& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK_THAT(msg, Catch::Matchers::Contains("EMBER_ASSERT(2 < 1) failed"));
    CHECK_THAT(msg, Catch::Matchers::Contains("test_config.cpp:"));
  }
  // It is a void expression, usable where an expression is required.
  static_assert(std::is_void_v<decltype(EMBER_ASSERT(true))>);
  int evaluated = 0;
  EMBER_ASSERT(++evaluated == 1);
  CHECK(evaluated == 1);  // the condition is evaluated exactly once
}

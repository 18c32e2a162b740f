/// Version macros, the EMBER_ASSERT precondition hook and OpenMP detection for ember.
// SPDX-License-Identifier: MIT
#pragma once

#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 1
#define EMBER_VERSION_PATCH 0
#define EMBER_VERSION \
  (EMBER_VERSION_MAJOR * 10000 + EMBER_VERSION_MINOR * 100 + EMBER_VERSION_PATCH)

/// EMBER_ASSERT(cond) states a precondition of a detail kernel, which the public entry point that
/// calls it has already validated. It maps to `assert` unless the user defines it before including
/// ember (as with `eigen_assert`); ember's own tests define it to throw so preconditions are
/// testable. Public API never relies on it: bad user input is reported by exceptions in every build
/// type.
#define EMBER_STRINGIFY_(x) #x
#define EMBER_STRINGIFY(x) EMBER_STRINGIFY_(x)
#ifndef EMBER_ASSERT
#if defined(EMBER_TESTING)
// ember's own test build: a violated precondition throws, so tests can observe it.
#include <stdexcept>
#define EMBER_ASSERT(cond)                                                       \
  ((cond) ? void(0)                                                              \
          : throw std::logic_error("EMBER_ASSERT(" #cond ") failed at " __FILE__ \
                                   ":" EMBER_STRINGIFY(__LINE__)))
#else
#include <cassert>
#define EMBER_ASSERT(cond) assert(cond)
#endif
#endif

/// EMBER_HAS_OPENMP is 1 when the including translation unit is compiled with OpenMP. ember's
/// parallel loops are plain `#pragma omp` loops, inert otherwise; it never starts threads of its
/// own.
#if defined(_OPENMP)
#define EMBER_HAS_OPENMP 1
#include <omp.h>
#else
#define EMBER_HAS_OPENMP 0
#endif

#define EMBER_PRAGMA_(x) _Pragma(#x)
#if EMBER_HAS_OPENMP
/// Parallel-for over a loop, static schedule, only when the trip count `n` is worth the threads.
#define EMBER_OMP_FOR(n) EMBER_PRAGMA_(omp parallel for schedule(static) if ((n) >= 64))
#else
#define EMBER_OMP_FOR(n)
#endif

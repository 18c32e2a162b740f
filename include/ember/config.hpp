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
/// Kept for callers outside the hot kernels; the kernels use detail::parallel_rows, which does not
/// enter the OpenMP runtime at all for small work (an `if` clause still does).
#define EMBER_OMP_FOR(n) EMBER_PRAGMA_(omp parallel for schedule(static) if ((n) >= 64))
#else
#define EMBER_OMP_FOR(n)
#endif

#include <algorithm>

#include <Eigen/Core>

namespace ember::detail {

/// Work (in elements) below which a kernel stays on the calling thread: about 64 rows of 512
/// floats, a few microseconds of copying, where starting a parallel region costs more than it
/// saves.
inline constexpr Eigen::Index kParallelMinWork = Eigen::Index{1} << 15;

/// Threads a kernel over `work` elements would use: 1 without OpenMP, inside a parallel region
/// (no nesting), when one thread is allowed, or below kParallelMinWork.
[[nodiscard]] inline int kernel_threads(Eigen::Index work) noexcept {
#if EMBER_HAS_OPENMP
  if (work < kParallelMinWork || omp_in_parallel()) return 1;
  return omp_get_max_threads();
#else
  static_cast<void>(work);
  return 1;
#endif
}

/// Calls body(begin, end, worker) on disjoint contiguous chunks covering [0, n); worker is the
/// calling thread's number in [0, kernel_threads(work)), for per-thread scratch allocated by the
/// caller beforehand. `work` is the total element count used to decide whether threads are worth
/// it; small calls branch straight to a single serial body(0, n, 0) without entering the OpenMP
/// runtime. `body` must not throw.
///
/// Chunks are handed out dynamically, several per thread: on a shared machine a thread that is
/// descheduled mid-call delays only its current chunk, not a whole static half. Every item is
/// computed by the same code whichever thread runs it, so results never depend on the split.
template <class F>
void parallel_rows(Eigen::Index n, Eigen::Index work, F&& body) {
#if EMBER_HAS_OPENMP
  const int threads = n > 1 ? kernel_threads(work) : 1;
  if (threads > 1) {
    const Eigen::Index chunks = std::min<Eigen::Index>(n, Eigen::Index{8} * threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (Eigen::Index c = 0; c < chunks; ++c) {
      body(n * c / chunks, n * (c + 1) / chunks, omp_get_thread_num());
    }
    return;
  }
#else
  static_cast<void>(work);
#endif
  if (n > 0) body(Eigen::Index{0}, n, 0);
}

}  // namespace ember::detail

/// The one way ember's kernels run rows in parallel: OpenMP chunks when the including program
/// compiles with OpenMP and the work is worth the threads, the calling thread otherwise.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>

#include <Eigen/Core>

#include "ember/config.hpp"

#if EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace ember::inline EMBER_ISA::detail {

/// Work (in elements) below which a kernel stays on the calling thread: about 64 rows of 512
/// floats, where starting a parallel region costs more than it saves.
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
/// calling thread's number in [0, kernel_threads(work)), for per-thread scratch. Calls of little
/// `work` (elements) run one serial body(0, n, 0) without entering OpenMP. `body` must not throw.
///
/// Chunks are handed out dynamically, several per thread: a thread descheduled mid-call delays
/// only its current chunk. Every item is computed by the same code whichever thread runs it, so
/// results never depend on the split.
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

}  // namespace ember::inline EMBER_ISA::detail

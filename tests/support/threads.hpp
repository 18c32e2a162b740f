// The OpenMP thread count of the parallel kernels (detail/parallel.hpp), set by tests that run
// them at several thread counts.
// SPDX-License-Identifier: MIT
#pragma once

#include <ember/config.hpp>

#if EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace ember_test {

/// Sets OpenMP's thread count for the next parallel regions (a no-op in builds without OpenMP).
inline void set_threads(int threads) {
#if EMBER_HAS_OPENMP
  omp_set_num_threads(threads);
#else
  static_cast<void>(threads);
#endif
}

/// Sets the OpenMP thread count for its lifetime and restores the previous one after.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) {
#if EMBER_HAS_OPENMP
    saved_ = omp_get_max_threads();
#endif
    set_threads(threads);
  }
  ~ScopedThreads() { set_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_ = 1;
};

}  // namespace ember_test

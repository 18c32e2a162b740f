/// The two loops shared by the small-n logits kernels: the dispatch on the hidden rows of a pass
/// (1 to max_pass_rows), so each pass size gets its own instantiation with its accumulators in
/// registers, and the order in which a kernel that reads whole rows one at a time takes them.
// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>
#include <utility>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The most hidden rows one pass of a small-n logits kernel takes: each encoded row is read once
/// per this many hidden rows, whose accumulators stay in registers. Every kernel, dispatch and
/// chunking of hidden rows names this one constant.
inline constexpr Index max_pass_rows = 8;

template <class F, Index... J>
EMBER_ALWAYS_INLINE void visit_pass_rows_over(Index nj, F& f,
                                              std::integer_sequence<Index, J...> /*sizes*/) {
  // The first J + 1 equal to nj, or the last size: a chain of comparisons the compiler folds.
  (void)((nj == J + 1 || J + 1 == max_pass_rows ? (f(std::integral_constant<Index, J + 1>{}), true)
                                                : false) ||
         ...);
}

/// Calls f(std::integral_constant<Index, n>{}) for the n = nj hidden rows of one pass, so each
/// pass size gets its own instantiation (max_pass_rows for any nj above it). Precondition:
/// 1 <= nj.
template <class F>
EMBER_ALWAYS_INLINE void visit_pass_rows(Index nj, F&& f) {
  visit_pass_rows_over(nj, f, std::make_integer_sequence<Index, max_pass_rows>{});
}

/// Calls f(std::integral_constant<Index, j>{}) for j = 0 .. N - 1, unrolled at compile time: the
/// per-hidden-row accumulators of a kernel then stay in registers (GCC 12 keeps a loop over 8
/// rows as a loop, with the accumulators in memory, and reloads and stores them every block).
template <class F, Index... J>
EMBER_ALWAYS_INLINE void unrolled_over(F& f, std::integer_sequence<Index, J...> /*rows*/) {
  (f(std::integral_constant<Index, J>{}), ...);
}
template <Index N, class F>
EMBER_ALWAYS_INLINE void unrolled(F&& f) {
  unrolled_over(f, std::make_integer_sequence<Index, N>{});
}

/// The parts for_rows_in_parts splits its rows into on this processor: 1 on AMD, 4 elsewhere
/// (measurements in bench/README.md). Reading rows from several parts at once helps where the
/// hardware prefetchers follow several streams better than one long one. Computed once, on first
/// use, and never changed: results do not depend on it.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
[[nodiscard]] inline Index default_row_parts() noexcept {
  static const Index parts = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") ? Index{1} : Index{4};
  }();
  return parts;
}
#else
[[nodiscard]] inline Index default_row_parts() noexcept { return 4; }
#endif

/// Calls f(r) once for each r in [0, count): the range split into `parts` contiguous parts, a row
/// of each in turn, each part in increasing r (the hardware's sequential prefetchers follow each
/// part). For kernels whose result for a row does not depend on the order rows are taken in.
/// Precondition: parts >= 1.
template <class F>
EMBER_ALWAYS_INLINE void for_rows_in_parts(Index count, Index parts, F&& f) {
  EMBER_ASSERT(parts >= 1);
  const Index part = (count + parts - 1) / parts;
  for (Index i = 0; i < part; ++i) {
    for (Index r = i; r < count; r += part) f(r);
  }
}

}  // namespace ember::inline EMBER_ISA::detail

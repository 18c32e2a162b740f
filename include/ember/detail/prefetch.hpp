/// The one prefetch helper of ember's kernels and its one distance setting: rows picked by ids
/// are random, so the hardware prefetchers cannot guess the next one; a kernel asks for the row
/// it will read a few ids later.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>

#include <Eigen/Core>

#include "ember/config.hpp"

/// How far ahead kernels prefetch, in bytes of rows: while row i is processed, the row of id
/// i + prefetch_distance(row bytes) is requested. A lead in bytes rather than rows keeps about the
/// same number of cache lines in flight whatever the row width and storage format.
#ifndef EMBER_PREFETCH_BYTES
#define EMBER_PREFETCH_BYTES 2048
#endif

/// The locality hint of those prefetches (__builtin_prefetch's third argument): 3 asks for L1,
/// 2 or 1 for L2, 0 for a non-temporal fetch.
#ifndef EMBER_PREFETCH_LOCALITY
#define EMBER_PREFETCH_LOCALITY 3
#endif

namespace ember::inline EMBER_ISA::detail {

/// Rows of lead for rows of `row_bytes` bytes: EMBER_PREFETCH_BYTES / row_bytes, at least 2 and
/// at most 64.
[[nodiscard]] constexpr Eigen::Index prefetch_distance(Eigen::Index row_bytes) noexcept {
  const Eigen::Index rows = Eigen::Index{EMBER_PREFETCH_BYTES} / std::max<Eigen::Index>(row_bytes, 1);
  return std::clamp<Eigen::Index>(rows, 2, 64);
}

/// Asks for the row at `row` (`bytes` long) ahead of use: its first four cache lines and its last
/// one; the hardware prefetchers follow the sequential rest of a longer row on their own. A hint
/// only: no effect on results, and nothing at all on compilers without __builtin_prefetch.
EMBER_ALWAYS_INLINE void prefetch_row(const void* row, Eigen::Index bytes) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const auto* p = static_cast<const char*>(row);
  constexpr int hint = EMBER_PREFETCH_LOCALITY;
  __builtin_prefetch(p, 0, hint);
  if (bytes > 64) __builtin_prefetch(p + 64, 0, hint);
  if (bytes > 128) __builtin_prefetch(p + 128, 0, hint);
  if (bytes > 192) __builtin_prefetch(p + 192, 0, hint);
  if (bytes > 256) __builtin_prefetch(p + bytes - 1, 0, hint);
#else
  static_cast<void>(row);
  static_cast<void>(bytes);
#endif
}

}  // namespace ember::inline EMBER_ISA::detail

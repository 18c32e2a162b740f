/// The one prefetch helper of ember's kernels and its one distance setting (EMBER_PREFETCH_BYTES
/// and EMBER_PREFETCH_LOCALITY, in config.hpp): rows picked by ids are random, so the hardware
/// prefetchers cannot guess the next one; a kernel asks for the row it will read a few ids later.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>

#include <Eigen/Core>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Rows of lead for rows of `row_bytes` bytes: EMBER_PREFETCH_BYTES / row_bytes, within [2, 64].
[[nodiscard]] constexpr Eigen::Index prefetch_distance(Eigen::Index row_bytes) noexcept {
  const Eigen::Index rows =
      Eigen::Index{EMBER_PREFETCH_BYTES} / std::max<Eigen::Index>(row_bytes, 1);
  return std::clamp<Eigen::Index>(rows, 2, 64);
}

/// Cache lines at the start of a row that prefetch_row asks for by default: the hardware
/// prefetchers follow the sequential rest of a longer row on their own once it is being read.
inline constexpr Eigen::Index kPrefetchHeadBytes = 256;

/// Asks for the row at `row` (`bytes` long) ahead of use: the cache lines of its first `head`
/// bytes and its last line (a kernel that touches little of each row asks for the whole row).
/// A hint only: no effect on results, nothing at all without __builtin_prefetch.
EMBER_ALWAYS_INLINE void prefetch_row(const void* row, Eigen::Index bytes,
                                      Eigen::Index head = kPrefetchHeadBytes) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const auto* p = static_cast<const char*>(row);
  constexpr int hint = EMBER_PREFETCH_LOCALITY;
  const Eigen::Index reach = head < bytes ? head : bytes;
  for (Eigen::Index b = 0; b < reach; b += 64) __builtin_prefetch(p + b, 0, hint);
  if (bytes > reach) __builtin_prefetch(p + bytes - 1, 0, hint);
#else
  static_cast<void>(row);
  static_cast<void>(bytes);
  static_cast<void>(head);
#endif
}

}  // namespace ember::inline EMBER_ISA::detail

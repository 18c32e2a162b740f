/// The prefetch helpers of ember's kernels. prefetch_row, with its distance setting
/// (EMBER_PREFETCH_BYTES and EMBER_PREFETCH_LOCALITY, in config.hpp), serves rows picked by ids:
/// they are random, so the hardware prefetchers cannot guess the next one, and a kernel asks for
/// the row it will read a few ids later. prefetch_slice, with stream_lead_rows, serves kernels
/// that read whole rows in order (the tied logits): they ask for a later row a slice at a time
/// while they compute, so that its read overlaps their work.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

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

/// The locality of the requests of kernels that read whole rows in order (the tied logits): the
/// outer cache levels only, so that a row asked for ahead does not evict the first level's
/// working set, and stays cached until it is read (measurements in bench/README.md).
inline constexpr int kStreamPrefetchLocality = 1;

/// How far ahead, at least, a kernel reading rows in order asks for a row: the row that many
/// bytes on (the next row for rows of 2 KB or more): a request for the next one of short rows
/// comes too late to hide the latency of memory and costs more than it saves (measurements in
/// bench/README.md).
inline constexpr Eigen::Index kStreamPrefetchLeadBytes = 2048;

/// Rows of lead for rows `row_stride` bytes apart: kStreamPrefetchLeadBytes / row_stride rounded
/// up, at least 1.
[[nodiscard]] constexpr Eigen::Index stream_lead_rows(Eigen::Index row_stride) noexcept {
  return std::max<Eigen::Index>(
      1, (kStreamPrefetchLeadBytes + row_stride - 1) / std::max<Eigen::Index>(row_stride, 1));
}

/// Asks for the cache lines of bytes [begin, end) of the row at `row` into the outer cache levels.
/// Kernels that read rows whole in order call it for the row they will read next, a slice per
/// block they decode of the current row: memory is then read while they compute, not only when a
/// load misses (docs/dev/lm_head.md). A hint only, as prefetch_row.
EMBER_ALWAYS_INLINE void prefetch_slice(const void* row, Eigen::Index begin,
                                        Eigen::Index end) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const auto* bytes = static_cast<const unsigned char*>(row);
  // The line holding byte `begin`, then the start of each later line before `end`.
  __builtin_prefetch(bytes + begin, 0, kStreamPrefetchLocality);
  const auto misalign =
      static_cast<Eigen::Index>(reinterpret_cast<std::uintptr_t>(bytes + begin) & 63);
  for (Eigen::Index at = begin + 64 - misalign; at < end; at += 64) {
    __builtin_prefetch(bytes + at, 0, kStreamPrefetchLocality);
  }
#else
  static_cast<void>(row);
  static_cast<void>(begin);
  static_cast<void>(end);
#endif
}

/// prefetch_slice of the Bytes bytes at p, for a kernel that reads one block of a row after
/// another: a line every 64 bytes from p, unrolled (a block's last line, when it is not asked for
/// here, is the next block's first).
template <std::size_t Bytes>
EMBER_ALWAYS_INLINE void prefetch_block(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t at = 0; at < Bytes; at += 64)
    __builtin_prefetch(bytes + at, 0, kStreamPrefetchLocality);
#else
  static_cast<void>(p);
#endif
}

}  // namespace ember::inline EMBER_ISA::detail

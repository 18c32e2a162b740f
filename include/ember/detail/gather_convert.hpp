/// Reduced-precision gather kernels: decode rows of a half, bfloat16 or int8 row-quantized table
/// to float, scale them, optionally add a positional row, in one pass per output row; and tied
/// logits over such a table, decoded block by block. Inputs were validated by the public caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include <Eigen/Core>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

#include "ember/config.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// dst[c] = float(src[c]) · s for c < d: the conversion loop of CastRows. bfloat16 is the top half
/// of a float (a 16-bit shift, which compilers vectorise); half uses F16C's vcvtph2ps when the
/// target has it, else Eigen's conversion.
template <class S>
EMBER_DETAIL_ALWAYS_INLINE void convert_scaled(const S* src, Index d, float s, float* dst) {
  if constexpr (std::is_same_v<S, Eigen::bfloat16>) {
    const auto* bits = reinterpret_cast<const std::uint16_t*>(src);
    for (Index c = 0; c < d; ++c) {
      const std::uint32_t w = static_cast<std::uint32_t>(bits[c]) << 16;
      float f;
      std::memcpy(&f, &w, sizeof f);
      dst[c] = f * s;
    }
  } else {
    Index c = 0;
#if defined(__F16C__) && defined(__AVX__)
    if constexpr (std::is_same_v<S, Eigen::half>) {
      const __m256 vs = _mm256_set1_ps(s);
      for (; c + 16 <= d; c += 16) {  // two conversions per step: more loads in flight
        const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c));
        const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c + 8));
        _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtph_ps(h0), vs));
        _mm256_storeu_ps(dst + c + 8, _mm256_mul_ps(_mm256_cvtph_ps(h1), vs));
      }
      for (; c + 8 <= d; c += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c));
        _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtph_ps(h), vs));
      }
    }
#endif
    for (; c < d; ++c) dst[c] = static_cast<float>(src[c]) * s;
  }
}

/// Row decoder of a table stored as Eigen::half or Eigen::bfloat16 (or float/double):
/// decode_scaled(r, s, dst) writes dst[c] = float(table[r, c]) · s.
template <class S>
struct CastRows {
  ConstTableRef<S> table;
  [[nodiscard]] Index rows() const noexcept { return table.rows; }
  [[nodiscard]] Index cols() const noexcept { return table.cols; }
  [[nodiscard]] Index row_bytes() const noexcept {
    return table.cols * static_cast<Index>(sizeof(S));
  }
  [[nodiscard]] const void* address(Index r) const noexcept { return table.row(r); }
  EMBER_DETAIL_ALWAYS_INLINE void decode_scaled(Index r, float s, float* dst) const {
    convert_scaled(table.row(r), table.cols, s, dst);
  }
};

/// Row decoder of FBGEMM's 8-bit row-wise layout: row r is `cols` uint8 codes followed by a float
/// scale and a float bias (unaligned), `stride` bytes apart; value = code · scale + bias.
struct Int8Rows {
  const std::uint8_t* data;
  Index rows_;
  Index cols_;
  Index stride;  ///< bytes per row, cols_ + 8 for the fused layout
  [[nodiscard]] Index rows() const noexcept { return rows_; }
  [[nodiscard]] Index cols() const noexcept { return cols_; }
  [[nodiscard]] Index row_bytes() const noexcept {
    return cols_ + 2 * static_cast<Index>(sizeof(float));
  }
  [[nodiscard]] const void* address(Index r) const noexcept { return data + r * stride; }
  [[nodiscard]] const std::uint8_t* codes(Index r) const noexcept { return data + r * stride; }
  [[nodiscard]] float row_scale(Index r) const noexcept {
    float v;
    std::memcpy(&v, codes(r) + cols_, sizeof v);
    return v;
  }
  [[nodiscard]] float row_bias(Index r) const noexcept {
    float v;
    std::memcpy(&v, codes(r) + cols_ + static_cast<Index>(sizeof(float)), sizeof v);
    return v;
  }
  /// dst[c] = (q[c] · scale + bias) · s, folded into one multiply-add per element. The plain
  /// loop is the kernel: compilers vectorise it (GCC 12 -O3 -march=native widens the codes
  /// through 16 bits), and an AVX2 path widening 8 codes at a time with vpmovzxbd measured
  /// slower in bench_reduced (int8 2.34x float instead of 2.60x at 4M x 128), so it was dropped.
  EMBER_DETAIL_ALWAYS_INLINE void decode_scaled(Index r, float s, float* dst) const {
    const std::uint8_t* q = codes(r);
    const float a = row_scale(r) * s;
    const float b = row_bias(r) * s;
    for (Index c = 0; c < cols_; ++c) dst[c] = static_cast<float>(q[c]) * a + b;
  }
};

/// How far ahead the reduced-precision gathers prefetch, in bytes of table rows: the row
/// ids[i + k] is requested while row i is decoded, k = prefetch_rows_ahead(row bytes). A lead in
/// bytes rather than rows keeps about the same number of cache lines in flight for every format
/// (a fixed 16 rows asked for 128 lines of float but only ~50 of int8). Define
/// EMBER_GATHER_PREFETCH_BYTES to tune it, or EMBER_GATHER_PREFETCH_DISTANCE to force a number of
/// rows (0 turns prefetching off).
#ifndef EMBER_GATHER_PREFETCH_BYTES
#define EMBER_GATHER_PREFETCH_BYTES 8192
#endif

/// The locality hint of those prefetches (__builtin_prefetch's third argument): 3 = into L1
/// (prefetcht0), 2 or 1 = into L2 (prefetcht1/t2), 0 = non-temporal. The defaults (8 KB of lead,
/// into L2) did best among the variants tried in bench_reduced at 4M x 128 (4, 8, 16 KB into L1;
/// 4, 8 KB into L2; bench/README.md), though by less than the run-to-run noise (±0.2x).
#ifndef EMBER_GATHER_PREFETCH_LOCALITY
#define EMBER_GATHER_PREFETCH_LOCALITY 1
#endif

/// Rows of lead for rows of `row_bytes` bytes: EMBER_GATHER_PREFETCH_BYTES / row_bytes, at least
/// 2 and at most 64 (or EMBER_GATHER_PREFETCH_DISTANCE when defined).
[[nodiscard]] constexpr Index prefetch_rows_ahead(Index row_bytes) noexcept {
#if defined(EMBER_GATHER_PREFETCH_DISTANCE)
  static_cast<void>(row_bytes);
  return EMBER_GATHER_PREFETCH_DISTANCE;
#else
  const Index rows = Index{EMBER_GATHER_PREFETCH_BYTES} / std::max<Index>(row_bytes, 1);
  return std::clamp<Index>(rows, 2, 64);
#endif
}

/// Hints every cache line of row `ids[i + distance]` into cache (a no-op without GCC/Clang
/// builtins). Rows are random, so the hardware prefetchers cannot guess them.
template <class Rows, class Id>
EMBER_DETAIL_ALWAYS_INLINE void prefetch_row(const Rows& rows, std::span<const Id> ids, Index i,
                                             Index distance) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const auto n = static_cast<Index>(ids.size());
  if (distance > 0 && i + distance < n) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i + distance)]);
    const auto* p = static_cast<const char*>(rows.address(id));
    const Index bytes = rows.row_bytes();
    // The first four lines and the last one: longer rows are sequential, which the hardware
    // prefetchers follow on their own.
    constexpr int hint = EMBER_GATHER_PREFETCH_LOCALITY;
    __builtin_prefetch(p, 0, hint);
    if (bytes > 64) __builtin_prefetch(p + 64, 0, hint);
    if (bytes > 128) __builtin_prefetch(p + 128, 0, hint);
    if (bytes > 192) __builtin_prefetch(p + 192, 0, hint);
    __builtin_prefetch(p + bytes - 1, 0, hint);
  }
#else
  (void)rows;
  (void)ids;
  (void)i;
  (void)distance;
#endif
}

/// ids[n], table[V, d] (decoded by `rows`), pe[P, d] (optional: pe.data may be null) -> out[n, d]:
/// out[i] = decode(table[ids[i]]) · scale (+ pe[offset + i % seq_len]), computed in float and
/// stored as O (float, or the storage type on request, rounded to nearest even).
/// Validated by ReducedEmbedding/QuantizedEmbedding::forward and embed_with_positions
/// (ids in range, out n x d, positions in range when pe is given).
template <class O, class Rows, class Id>
void gather_decode(const Rows& rows, std::span<const Id> ids, float scale, ConstTableRef<float> pe,
                   Index seq_len, Index offset, TableRef<O> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = rows.cols();
  EMBER_ASSERT(out.rows == n && out.cols == d);
  EMBER_ASSERT(pe.data == nullptr ||
               (pe.cols == d && seq_len > 0 && offset >= 0 && offset + seq_len <= pe.rows));
#if EMBER_HAS_OPENMP
#pragma omp parallel if (n >= 64)
#endif
  {
    RowVector<float> tmp;
    if constexpr (!std::is_same_v<O, float>) tmp.resize(d);
    const Index ahead = prefetch_rows_ahead(rows.row_bytes());
#if EMBER_HAS_OPENMP
#pragma omp for schedule(static)
#endif
    for (Index i = 0; i < n; ++i) {
      prefetch_row(rows, ids, i, ahead);
      const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
      EMBER_ASSERT(id >= 0 && id < rows.rows());
      float* dst = nullptr;
      if constexpr (std::is_same_v<O, float>) {
        dst = out.row(i);
      } else {
        dst = tmp.data();
      }
      rows.decode_scaled(id, scale, dst);
      if (pe.data != nullptr) {
        Eigen::Map<RowVector<float>>(dst, d) +=
            Eigen::Map<const RowVector<float>>(pe.row(offset + i % seq_len), d);
      }
      if constexpr (!std::is_same_v<O, float>) {
        Eigen::Map<RowVector<O>>(out.row(i), d) = tmp.template cast<O>();
      }
    }
  }
}

/// Rows decoded per block by logits_decode: block_rows x d floats live at once (4096 x 768 floats
/// = 12 MB for GPT-2 small), never the whole table.
inline constexpr Index logits_block_rows = 4096;

/// hidden[n, d], table[V, d] (decoded by `rows`) -> out[n, V] = hidden · decode(table)ᵀ, one GEMM
/// per block of logits_block_rows decoded rows. Validated by the public logits() callers.
template <class Rows>
void logits_decode(const Rows& rows, const Eigen::Ref<const RowMatrix<float>>& hidden,
                   Eigen::Ref<RowMatrix<float>> out) {
  const Index v = rows.rows();
  const Index d = rows.cols();
  EMBER_ASSERT(hidden.cols() == d && out.rows() == hidden.rows() && out.cols() == v);
  RowMatrix<float> block(std::min(v, logits_block_rows), d);
  for (Index r0 = 0; r0 < v; r0 += logits_block_rows) {
    const Index len = std::min(logits_block_rows, v - r0);
    for (Index r = 0; r < len; ++r) rows.decode_scaled(r0 + r, 1.0f, block.row(r).data());
    out.middleCols(r0, len).noalias() = hidden * block.topRows(len).transpose();
  }
}

/// grad_hidden[n, d] = grad_logits[n, V] · decode(table)[V, d], blockwise as logits_decode.
/// Validated by the public logits_backward() callers.
template <class Rows>
void logits_backward_decode(const Rows& rows, const Eigen::Ref<const RowMatrix<float>>& grad_logits,
                            Eigen::Ref<RowMatrix<float>> grad_hidden) {
  const Index v = rows.rows();
  const Index d = rows.cols();
  EMBER_ASSERT(grad_logits.cols() == v && grad_hidden.cols() == d &&
               grad_hidden.rows() == grad_logits.rows());
  grad_hidden.setZero();
  RowMatrix<float> block(std::min(v, logits_block_rows), d);
  for (Index r0 = 0; r0 < v; r0 += logits_block_rows) {
    const Index len = std::min(logits_block_rows, v - r0);
    for (Index r = 0; r < len; ++r) rows.decode_scaled(r0 + r, 1.0f, block.row(r).data());
    grad_hidden.noalias() += grad_logits.middleCols(r0, len) * block.topRows(len);
  }
}

}  // namespace ember::detail

/// Float dot products of stored rows with up to 8 hidden rows, each stored row read once: the
/// small-n tied logits of plain float tables (stream_dots) and of half / bfloat16 rows with hidden
/// rows rounded to the same type (exact_product_dots, whose products are exact, so every build
/// gives the same bits).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/detail/half.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/types.hpp"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX2__) && defined(__F16C__) && \
    defined(__FMA__)
#include <immintrin.h>
#define EMBER_DETAIL_FLOAT_DOTS_AVX 1
#else
#define EMBER_DETAIL_FLOAT_DOTS_AVX 0
#endif

namespace ember::inline EMBER_ISA::detail {

inline constexpr int dots_lanes = 32;

/// A stored row of IEEE half bits (little-endian) as floats.
struct Fp16Element {
  [[nodiscard]] static float at(const std::uint8_t* row, Index c) noexcept {
    return fp16_to_fp32(load_u16(row + 2 * c));  // exact: every half is a float
  }
  static constexpr Index bytes = 2;
};

/// A stored row of bfloat16 bits (little-endian) as floats.
struct Bf16Element {
  [[nodiscard]] static float at(const std::uint8_t* row, Index c) noexcept {
    return bf16_to_fp32(load_u16(row + 2 * c));
  }
  static constexpr Index bytes = 2;
};

/// A stored row of floats.
struct F32Element {
  [[nodiscard]] static float at(const std::uint8_t* row, Index c) noexcept {
    float v;
    std::memcpy(&v, row + 4 * c, sizeof v);
    return v;
  }
  static constexpr Index bytes = 4;
};

/// The sum of 32 lanes: t16[i] = a[i] + a[i + 16], then the tree of detail/qdot.hpp over t16.
[[nodiscard]] inline float tree32(const float* a) noexcept {
  float t16[16];
  for (int i = 0; i < 16; ++i) t16[i] = a[i] + a[i + 16];
  float t8[8];
  for (int i = 0; i < 8; ++i) t8[i] = t16[i] + t16[i + 8];
  float t4[4];
  for (int i = 0; i < 4; ++i) t4[i] = t8[i] + t8[i + 4];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

#if EMBER_DETAIL_FLOAT_DOTS_AVX
namespace avx {

/// 8 stored values from element c on, as floats.
EMBER_ALWAYS_INLINE __m256 load8(Fp16Element, const std::uint8_t* row, Index c) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
}
EMBER_ALWAYS_INLINE __m256 load8(Bf16Element, const std::uint8_t* row, Index c) noexcept {
  const __m256i wide =
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
EMBER_ALWAYS_INLINE __m256 load8(F32Element, const std::uint8_t* row, Index c) noexcept {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * c));
}

/// The sum of the 32 lanes of a[0..3] (lanes 8i .. 8i + 7 in a[i]) in tree32's order.
EMBER_ALWAYS_INLINE float tree32(const __m256* a) noexcept {
  const __m256 lo = _mm256_add_ps(a[0], a[2]);  // t16[0..7]
  const __m256 hi = _mm256_add_ps(a[1], a[3]);  // t16[8..15]
  const __m256 t8 = _mm256_add_ps(lo, hi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

template <Index N, class E>
EMBER_ALWAYS_INLINE void dots_n(E e, const std::uint8_t* rows, Index row_stride, Index count,
                                Index d, const float* v, Index v_stride, float* out,
                                Index out_stride) {
  const Index whole = d - d % dots_lanes;
  for (Index r = 0; r < count; ++r) {
    const std::uint8_t* row = rows + r * row_stride;
    constexpr auto n = static_cast<std::size_t>(N);
    __m256 acc[n][4];
    EMBER_UNROLL for (Index j = 0; j < N; ++j) EMBER_UNROLL for (int k = 0; k < 4; ++k) acc[j][k] =
        _mm256_setzero_ps();
    for (Index c = 0; c < whole; c += dots_lanes) {
      __m256 w[4];
      EMBER_UNROLL for (int k = 0; k < 4; ++k) w[k] = load8(e, row, c + 8 * k);
      EMBER_UNROLL for (Index j = 0; j < N; ++j) {
        const float* x = v + j * v_stride + c;
        EMBER_UNROLL for (int k = 0; k < 4; ++k) acc[j][k] =
            _mm256_fmadd_ps(w[k], _mm256_loadu_ps(x + 8 * k), acc[j][k]);
      }
    }
    EMBER_UNROLL for (Index j = 0; j < N; ++j) {
      float lanes[dots_lanes];
      EMBER_UNROLL for (int k = 0; k < 4; ++k) _mm256_storeu_ps(lanes + 8 * k, acc[j][k]);
      const float* x = v + j * v_stride;
      for (Index c = whole; c < d; ++c)
        lanes[c - whole] = std::fma(E::at(row, c), x[c], lanes[c - whole]);
      out[j * out_stride + r] = detail::tree32(lanes);
    }
  }
}

}  // namespace avx
#endif

#if EMBER_DETAIL_FLOAT_DOTS_AVX && defined(__AVX512F__)
namespace avx512 {

/// 16 stored values from element c on, as floats.
EMBER_ALWAYS_INLINE __m512 load16(Fp16Element, const std::uint8_t* row, Index c) noexcept {
  return _mm512_maskz_cvtph_ps(__mmask16{0xFFFF},
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
}
EMBER_ALWAYS_INLINE __m512 load16(Bf16Element, const std::uint8_t* row, Index c) noexcept {
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(
      __mmask16{0xFFFF}, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16{0xFFFF}, wide, 16));
}
EMBER_ALWAYS_INLINE __m512 load16(F32Element, const std::uint8_t* row, Index c) noexcept {
  return _mm512_loadu_ps(reinterpret_cast<const float*>(row + 4 * c));
}

/// Columns of one tile: 64 columns (256 bytes of a float row) of N hidden rows and of a chunk of
/// table rows, the chunk's rows read in turn, so that chunk_rows rows are being read at once.
/// Measured on float rows, cold, V = 32000, d = 4096, against tiles of 16 KB of hidden
/// rows: 1.15-1.5x faster at N = 3 to 8 (docs/lm_head.md).
inline constexpr Index tile_columns = 64;

/// Hidden values (32 KB) up to which lockstep_dots reads its 1 or 2 hidden rows whole.
inline constexpr Index lockstep_values = 8192;

/// Table rows per chunk: their accumulators live in memory between tiles (8 and 4 measured
/// alike, 16 and 32 up to 1.25x slower).
inline constexpr Index chunk_rows = 4;

/// Table rows lockstep_dots reads side by side for N hidden rows: 8 accumulator pairs in all, so
/// the multiply-adds of different rows overlap where one row's wait on each other.
template <Index N>
inline constexpr Index lockstep_rows = 8 / N;

/// dots_n of N <= 2 hidden rows over whole rows (no tiles), lockstep_rows<N> table rows at a
/// time, each with its own accumulators: every logit is the same operations in the same order
/// as in dots_n. Measured 1.5-1.9x faster cold than one row at a time at N = 2 (docs/lm_head.md).
template <Index N, class E>
EMBER_ALWAYS_INLINE void lockstep_dots(E e, const std::uint8_t* rows, Index row_stride, Index count,
                                       Index d, const float* v, Index v_stride, float* out,
                                       Index out_stride) {
  static_assert(N == 1 || N == 2);
  constexpr Index k_rows = lockstep_rows<N>;
  constexpr auto k = static_cast<std::size_t>(k_rows);
  constexpr auto n = static_cast<std::size_t>(N);
  const Index whole = d - d % dots_lanes;
  for (Index r0 = 0; r0 < count; r0 += k_rows) {
    const Index len = std::min(k_rows, count - r0);
    const std::uint8_t* first = rows + r0 * row_stride;
    __m512 acc[k][n][2];
    EMBER_UNROLL for (std::size_t r = 0; r < k; ++r)
        EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) acc[r][j][0] = acc[r][j][1] =
            _mm512_setzero_ps();
    if (len == k_rows) {
      for (Index c = 0; c < whole; c += dots_lanes) {
        __m512 x[n][2];
        EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
          x[j][0] = _mm512_loadu_ps(v + static_cast<Index>(j) * v_stride + c);
          x[j][1] = _mm512_loadu_ps(v + static_cast<Index>(j) * v_stride + c + 16);
        }
        EMBER_UNROLL for (std::size_t r = 0; r < k; ++r) {
          const std::uint8_t* row = first + static_cast<Index>(r) * row_stride;
          const __m512 w0 = load16(e, row, c);
          const __m512 w1 = load16(e, row, c + 16);
          EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
            acc[r][j][0] = _mm512_fmadd_ps(w0, x[j][0], acc[r][j][0]);
            acc[r][j][1] = _mm512_fmadd_ps(w1, x[j][1], acc[r][j][1]);
          }
        }
      }
    } else {
      for (Index r = 0; r < len; ++r) {
        const std::uint8_t* row = first + r * row_stride;
        for (Index c = 0; c < whole; c += dots_lanes) {
          const __m512 w0 = load16(e, row, c);
          const __m512 w1 = load16(e, row, c + 16);
          EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
            const float* x = v + static_cast<Index>(j) * v_stride + c;
            auto& a = acc[static_cast<std::size_t>(r)][j];
            a[0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), a[0]);
            a[1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), a[1]);
          }
        }
      }
    }
    for (Index r = 0; r < len; ++r) {
      const std::uint8_t* row = first + r * row_stride;
      EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
        alignas(64) float lanes[dots_lanes];
        _mm512_store_ps(lanes, acc[static_cast<std::size_t>(r)][j][0]);
        _mm512_store_ps(lanes + 16, acc[static_cast<std::size_t>(r)][j][1]);
        const float* x = v + static_cast<Index>(j) * v_stride;
        for (Index c = whole; c < d; ++c)
          lanes[c - whole] = std::fma(E::at(row, c), x[c], lanes[c - whole]);
        out[static_cast<Index>(j) * out_stride + r0 + r] = detail::tree32(lanes);
      }
    }
  }
}

/// As avx::dots_n (the same order per lane: lanes 0-15 and 16-31 of the two accumulators), over
/// tiles of columns: each accumulator is saved and reloaded exactly between tiles.
template <Index N, class E>
EMBER_ALWAYS_INLINE void dots_n(E e, const std::uint8_t* rows, Index row_stride, Index count,
                                Index d, const float* v, Index v_stride, float* out,
                                Index out_stride) {
  const Index whole = d - d % dots_lanes;
  constexpr Index tile = tile_columns;
  if constexpr (N <= 2) {
    if (whole * N <= lockstep_values) {
      lockstep_dots<N>(e, rows, row_stride, count, d, v, v_stride, out, out_stride);
      return;
    }
  }
  constexpr auto n = static_cast<std::size_t>(N);
  alignas(64) float saved[chunk_rows][n][dots_lanes];
  const bool tiled = whole > tile;
  // The prefetch lead in columns of a row stream (see below), as whole rows and a remainder.
  constexpr Index lead = (kStreamPrefetchLeadBytes / E::bytes + tile - 1) / tile * tile;
  const Index lead_rows = tiled ? lead / whole : 0;
  const Index lead_col = tiled ? lead % whole : 0;
  for (Index r0 = 0; r0 < count; r0 += chunk_rows) {
    const Index len = std::min(chunk_rows, count - r0);
    for (Index c0 = 0; c0 < whole; c0 += tile) {
      const Index c1 = std::min(whole, c0 + tile);
      for (Index r = 0; r < len; ++r) {
        const std::uint8_t* row = rows + (r0 + r) * row_stride;
        // Row r of the chunk, then row r of the next chunks, is one stream of tiles: the tile
        // kStreamPrefetchLeadBytes on in that stream is asked for, so that its read overlaps
        // the work on the tiles before it.
        if (tiled) {
          Index col = c0 + lead_col;
          Index ahead_rows = lead_rows;
          if (col >= whole) {
            col -= whole;
            ++ahead_rows;
          }
          const Index target = r0 + r + ahead_rows * chunk_rows;
          if (target < count)
            prefetch_row(rows + target * row_stride + col * E::bytes, tile * E::bytes);
        }
        __m512 acc[n][2];
        EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
          acc[j][0] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(saved[r][j]);
          acc[j][1] = c0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(saved[r][j] + 16);
        }
        for (Index c = c0; c < c1; c += dots_lanes) {
          const __m512 w0 = load16(e, row, c);
          const __m512 w1 = load16(e, row, c + 16);
          EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
            const float* x = v + static_cast<Index>(j) * v_stride + c;
            acc[j][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc[j][1]);
          }
        }
        EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
          _mm512_store_ps(saved[r][j], acc[j][0]);
          _mm512_store_ps(saved[r][j] + 16, acc[j][1]);
        }
      }
    }
    for (Index r = 0; r < len; ++r) {
      const std::uint8_t* row = rows + (r0 + r) * row_stride;
      EMBER_UNROLL for (std::size_t j = 0; j < n; ++j) {
        float* lanes = saved[r][j];
        if (whole == 0) std::fill(lanes, lanes + dots_lanes, 0.0f);
        const float* x = v + static_cast<Index>(j) * v_stride;
        for (Index c = whole; c < d; ++c)
          lanes[c - whole] = std::fma(E::at(row, c), x[c], lanes[c - whole]);
        out[static_cast<Index>(j) * out_stride + r0 + r] = detail::tree32(lanes);
      }
    }
  }
}

}  // namespace avx512
#endif

/// out[j·out_stride + r] = Σ_c w_rc · v_jc for the `count` stored rows at `rows` (row_stride
/// bytes apart, elements read through E) and nj <= 8 float rows v (v_stride apart), each stored
/// row read once: lane c mod 32 accumulates w · v in increasing c, fused or not, and the lanes
/// are summed by tree32. Where every product w · v is exact in float (half or bfloat16 values
/// times values of the same type) the result is the same bits in every build; otherwise the
/// build's FMA makes the difference (within d · 2⁻²⁴ · Σ |w · v| of the exact sum either way).
template <class E>
void float_row_dots(E e, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                    const float* v, Index v_stride, Index nj, float* out, Index out_stride) {
  EMBER_ASSERT(nj >= 1 && nj <= max_pass_rows);
#if EMBER_DETAIL_FLOAT_DOTS_AVX
  const auto run = [&](auto n) {
#if defined(__AVX512F__)
    avx512::dots_n<decltype(n)::value>(e, rows, row_stride, count, d, v, v_stride, out, out_stride);
#else
    avx::dots_n<decltype(n)::value>(e, rows, row_stride, count, d, v, v_stride, out, out_stride);
#endif
  };
  visit_pass_rows(nj, run);
#else
  static_cast<void>(e);
  for (Index r = 0; r < count; ++r) {
    const std::uint8_t* row = rows + r * row_stride;
    for (Index j = 0; j < nj; ++j) {
      float lanes[dots_lanes] = {};
      const float* x = v + j * v_stride;
      for (Index c = 0; c < d; ++c) lanes[c % dots_lanes] += E::at(row, c) * x[c];
      out[j * out_stride + r] = tree32(lanes);
    }
  }
#endif
}

/// Hidden rows h[n, d] (row j at h + j · h_stride) rounded to half (E = Fp16Element) or bfloat16
/// (Bf16Element) to nearest even, as ggml rounds the hidden rows of an F16 or BF16 product, kept
/// as floats for float_row_dots.
template <class E>
[[nodiscard]] QuantizedHidden round_hidden(E, const float* h, Index h_stride, Index n, Index d) {
  static_assert(std::is_same_v<E, Fp16Element> || std::is_same_v<E, Bf16Element>);
  QuantizedHidden q;
  q.reset(QuantizedHidden::Layout::values, n, d, false);
  for (Index j = 0; j < n; ++j) {
    const float* x = h + j * h_stride;
    float* v = q.row_values(j);
    for (Index c = 0; c < d; ++c) {
      v[c] = std::is_same_v<E, Fp16Element> ? fp16_to_fp32(fp32_to_fp16(x[c]))
                                            : bf16_to_fp32(fp32_to_bf16(x[c]));
    }
  }
  return q;
}

/// float_row_dots of rows of E with rounded hidden rows j0 .. j0 + nj of q.
template <class E>
void rounded_row_dots(E e, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                      const QuantizedHidden& q, Index j0, Index nj, float* out, Index out_stride) {
  float_row_dots(e, rows, row_stride, count, d, q.row_values(j0), q.d, nj, out, out_stride);
}

}  // namespace ember::inline EMBER_ISA::detail

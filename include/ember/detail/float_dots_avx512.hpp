/// The AVX-512 kernel of float_row_dots (float_dots.hpp): 512-bit fused multiply-adds in the
/// lanes of the AVX2 kernel, stored rows in tiles of columns (or side by side for 1 or 2 hidden
/// rows), the next tiles asked for ahead.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ember/config.hpp"
#include "ember/detail/float_dots_avx2.hpp"
#include "ember/detail/float_dots_portable.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/types.hpp"

// 1 where the build targets AVX-512F on top of the AVX2 kernel's instruction sets.
#if EMBER_DETAIL_FLOAT_DOTS_AVX2 && defined(__AVX512F__)
#define EMBER_DETAIL_FLOAT_DOTS_AVX512 1
#else
#define EMBER_DETAIL_FLOAT_DOTS_AVX512 0
#endif

#if EMBER_DETAIL_FLOAT_DOTS_AVX512
namespace ember::inline EMBER_ISA::detail::avx512 {

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
/// table rows, the chunk's rows read in turn, so that chunk_rows rows are being read at once while
/// the tile's hidden values stay in the first level (tile sizes measured: bench/README.md).
inline constexpr Index tile_columns = 64;

/// Hidden values (32 KB) up to which lockstep_dots reads its 1 or 2 hidden rows whole.
inline constexpr Index lockstep_values = 8192;

/// Table rows per chunk: their accumulators live in memory between tiles; a few rows keep several
/// reads in flight (chunk sizes measured: bench/README.md).
inline constexpr Index chunk_rows = 4;

/// Table rows lockstep_dots reads side by side for N hidden rows: 8 accumulator pairs in all, so
/// the multiply-adds of different rows overlap where one row's wait on each other.
template <Index N>
inline constexpr Index lockstep_rows = 8 / N;

/// dots_n of N <= 2 hidden rows over whole rows (no tiles), lockstep_rows<N> table rows at a
/// time, each with its own accumulators: every logit is the same operations in the same order
/// as in dots_n; the rows' reads and multiply-adds overlap where one row alone waits on memory
/// (bench/README.md).
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

/// As avx2::dots_n (the same order per lane: lanes 0-15 and 16-31 of the two accumulators), over
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

}  // namespace ember::inline EMBER_ISA::detail::avx512
#endif

/// The AVX2 exact dot of ggml rows with float vectors (tied logits, exact mode): each encoded row
/// read once per pass of up to max_pass_rows vectors, its codes dotted with them as they are
/// unpacked (ggml/unpack_avx2.hpp) and never decoded whole. The row loops here also run the
/// AVX-512 sink of ggml/exact_dot_avx512.hpp (the same loops over another vector width).
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/ggml/isa.hpp"

#if EMBER_DETAIL_GGML_AVX2
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/type.hpp"
#include "ember/ggml/unpack_avx2.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml::avx2 {

#if defined(__FMA__)
EMBER_ALWAYS_INLINE __m256 multiply_add(__m256 a, __m256 b, __m256 acc) noexcept {
  return _mm256_fmadd_ps(a, b, acc);
}
#else
EMBER_ALWAYS_INLINE __m256 multiply_add(__m256 a, __m256 b, __m256 acc) noexcept {
  return _mm256_add_ps(_mm256_mul_ps(a, b), acc);
}
#endif

/// The sum of the 8 lanes of v, in pairs (through memory: with the shuffle intrinsics here, GCC 12
/// at -O2 lost the stores of the caller of a function inlining this).
EMBER_ALWAYS_INLINE float lane_sum(__m256 v) noexcept {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/// The vector operations of DotsOf's accumulators at 8 lanes, and how the codes of 32 columns
/// go into them: 8 codes at a time as floats.
struct Vec256 {
  using Vector = __m256;
  /// True for the block types whose super-blocks the sink takes whole (none at 8 lanes).
  template <class B>
  static constexpr bool takes_super = false;
  EMBER_ALWAYS_INLINE static __m256 zero() noexcept { return _mm256_setzero_ps(); }
  EMBER_ALWAYS_INLINE static __m256 load(const float* x) noexcept { return _mm256_loadu_ps(x); }
  EMBER_ALWAYS_INLINE static __m256 mul(__m256 a, __m256 b) noexcept { return _mm256_mul_ps(a, b); }
  EMBER_ALWAYS_INLINE static __m256 fma(__m256 a, __m256 b, __m256 c) noexcept {
    return multiply_add(a, b, c);
  }
  EMBER_ALWAYS_INLINE static __m256 add(__m256 a, __m256 b) noexcept { return _mm256_add_ps(a, b); }
  EMBER_ALWAYS_INLINE static __m256 set1(float a) noexcept { return _mm256_set1_ps(a); }
  EMBER_ALWAYS_INLINE static float sum(__m256 v) noexcept { return lane_sum(v); }

  /// Σ q · h of 32 columns into each vector's accumulators (DotsOf::codes).
  template <class Sink, bool Offset, bool Same, bool Signed>
  EMBER_ALWAYS_INLINE static void codes(Sink& dots, Index c,
                                        const Codes32<Offset, Same, Signed>& g) noexcept {
    __m256 v[4];
    EMBER_UNROLL for (int i = 0; i < 4; ++i) v[i] = _mm256_cvtepi32_ps(g.codes8(i));
    dots.each([&](auto j) EMBER_INLINE_LAMBDA {
      const __m256 p0 = fma(v[1], load(dots.x(j, c + 8)), mul(v[0], load(dots.x(j, c))));
      const __m256 p1 = fma(v[3], load(dots.x(j, c + 24)), mul(v[2], load(dots.x(j, c + 16))));
      if constexpr (Same) {
        dots.add(j, add(p0, p1), g.a0);
      } else {
        dots.add(j, p0, g.a0);
        dots.add(j, p1, g.a1);
      }
    });
  }
};

/// Sink of the dot products of a row with N vectors h_j (vector j at h + j · h_stride), its
/// accumulators V::Vector (Vec256 here, avx512::Vec512 at 16 lanes).
///
/// Codes are never turned into the decoded values: over each half of 32 columns (one scale a, one
/// offset b), Σ_c ((q_c - k) · a + b) · h_c is computed as a · Σ_c q_c · h_c + (b - k · a) · Σ_c
/// h_c, the sums of h over each 16 columns computed once per call (hsum) and the coefficients b - k
/// · a of the row collected (coef) and applied when the row ends. The Σ q · h go into vector
/// accumulators, two per vector h alternating (so consecutive multiply-adds do not wait on each
/// other) for the vectors of a quarter (0-3, 4-7) of at most 2 vectors, one per vector otherwise
/// (the order of passes of 4, which dot_rows has always had). The plain types' values go into
/// 8-lane accumulators (8 at a time), the tail of their last 31 columns into a scalar sum.
template <std::size_t N, class V>
struct DotsOf {
  using Vector = typename V::Vector;
  static constexpr std::size_t rows = N;
  /// True for the block types whose super-blocks V takes whole (DotsOf::block).
  template <class B>
  static constexpr bool takes_super = V::template takes_super<B>;
  /// True when vector j alternates between two accumulators.
  [[nodiscard]] static constexpr bool two(std::size_t j) noexcept {
    return (j < 4 ? std::min<std::size_t>(N, 4) : N - 4) <= 2;
  }
  /// Calls f(std::integral_constant<std::size_t, j>) for j = 0 .. N - 1, unrolled.
  template <class F>
  EMBER_ALWAYS_INLINE static void each(F&& f) {
    each_of(f, std::make_index_sequence<N>{});
  }
  template <class F, std::size_t... J>
  EMBER_ALWAYS_INLINE static void each_of(F& f, std::index_sequence<J...>) {
    (f(std::integral_constant<std::size_t, J>{}), ...);
  }
  const float* h;
  Index h_stride;
  const float* hsum;  // hsum[j · groups + g] = Σ of h_j over columns 16g .. 16g + 15
  Index groups;
  float* coef;  // coef[g]: the row's b - k · a of columns 16g .. 16g + 15
  Vector acc[N][2] = {};
  __m256 acc8[N] = {};
  float tail[N] = {};

  /// A row's accumulators as dot_tiles keeps them between the row's column tiles.
  struct Kept {
    Vector acc[N][2];
    __m256 acc8[N];
    float tail[N];
  };
  /// Takes the accumulators kept in k that a row of Coded (block) or plain type uses: acc, or acc8
  /// and tail.
  template <bool Coded>
  EMBER_ALWAYS_INLINE void take(const Kept& k) noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA {
      if constexpr (Coded) {
        acc[j][0] = k.acc[j][0];
        if constexpr (two(j)) acc[j][1] = k.acc[j][1];
      } else {
        acc8[j] = k.acc8[j];
        tail[j] = k.tail[j];
      }
    });
  }
  /// Keeps in k the accumulators take<Coded> takes: a few vector stores at a tile's end, not a
  /// copy of the whole sink.
  template <bool Coded>
  EMBER_ALWAYS_INLINE void keep(Kept& k) const noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA {
      if constexpr (Coded) {
        k.acc[j][0] = acc[j][0];
        if constexpr (two(j)) k.acc[j][1] = acc[j][1];
      } else {
        k.acc8[j] = acc8[j];
        k.tail[j] = tail[j];
      }
    });
  }

  [[nodiscard]] EMBER_ALWAYS_INLINE const float* x(std::size_t j, Index c) const noexcept {
    return h + static_cast<Index>(j) * h_stride + c;
  }
  /// Adds a · p into vector j's accumulators, alternating between its two while it has two (a in
  /// every lane of `a`).
  template <std::size_t J>
  EMBER_ALWAYS_INLINE void add(std::integral_constant<std::size_t, J>, Vector p,
                               Vector a) noexcept {
    acc[J][0] = V::fma(p, a, acc[J][0]);
    if constexpr (two(J)) std::swap(acc[J][0], acc[J][1]);
  }
  /// add() of a scalar scale (the same products, so the same bits).
  template <std::size_t J>
  EMBER_ALWAYS_INLINE void add(std::integral_constant<std::size_t, J> j, Vector p,
                               float a) noexcept {
    add(j, p, V::set1(a));
  }

  template <bool Offset, bool Same, bool Signed>
  EMBER_ALWAYS_INLINE void codes(Index c, const Codes32<Offset, Same, Signed>& g) noexcept {
    const Index group = c / 16;
    coef[group] = Offset ? g.b0 : -static_cast<float>(g.k) * g.a0;
    coef[group + 1] = Offset ? g.b1 : -static_cast<float>(g.k) * g.a1;
    V::codes(*this, c, g);
  }
  EMBER_ALWAYS_INLINE void put32(Index c, __m256 y0, __m256 y1, __m256 y2, __m256 y3) noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA {
      const __m256 p0 = multiply_add(y1, _mm256_loadu_ps(x(j, c + 8)),
                                     _mm256_mul_ps(y0, _mm256_loadu_ps(x(j, c))));
      const __m256 p1 = multiply_add(y3, _mm256_loadu_ps(x(j, c + 24)),
                                     _mm256_mul_ps(y2, _mm256_loadu_ps(x(j, c + 16))));
      acc8[j] = _mm256_add_ps(acc8[j], _mm256_add_ps(p0, p1));
    });
  }
  EMBER_ALWAYS_INLINE void put1(Index c, float y) noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA { tail[j] += rounded(y * *x(j, c)); });
  }
  /// Block b of type B at column c: a super-block whole where V takes it (V::super_block, the
  /// bits of feed's 32-column calls), else as feed feeds it.
  template <class B>
  EMBER_ALWAYS_INLINE void block(const std::uint8_t* b, Index c) noexcept {
    if constexpr (V::template takes_super<B>) {
      V::template super_block<B>(*this, b, c);
    } else {
      feed(std::type_identity<B>{}, b, c, *this);
    }
  }
  /// The dot product with vector j, its offsets' 8-lane sum over the whole groups of 8 given in
  /// o: its accumulators, then the offsets' Σ coef · hsum (codes), then the tail (plain types).
  [[nodiscard]] EMBER_ALWAYS_INLINE float finish(std::size_t j, bool coded,
                                                 __m256 o) const noexcept {
    Vector v = acc[j][0];
    if (two(j)) v = V::add(v, acc[j][1]);
    float r = V::sum(v) + lane_sum(acc8[j]);
    if (coded) {
      const float* hs = hsum + static_cast<Index>(j) * groups;
      float rest = 0.0f;
      for (Index g = groups - groups % 8; g < groups; ++g) rest += rounded(coef[g] * hs[g]);
      r += lane_sum(o) + rest;
    }
    return r + tail[j];
  }
  /// The dot product with each vector j, written to out[j · out_stride] (finish), the offsets of
  /// all N vectors taken in one pass over the coefficients, each in its own lanes, so that their
  /// chains of multiply-adds overlap. The same operations per vector, so the same bits.
  EMBER_ALWAYS_INLINE void results(bool coded, float* out, Index out_stride) const noexcept {
    __m256 o[N];
    each([&](auto j) EMBER_INLINE_LAMBDA { o[j] = _mm256_setzero_ps(); });
    for (Index g = 0; coded && g + 8 <= groups; g += 8) {
      const __m256 c = _mm256_loadu_ps(coef + g);
      each([&](auto j) EMBER_INLINE_LAMBDA {
        o[j] = multiply_add(c, _mm256_loadu_ps(hsum + static_cast<Index>(j) * groups + g), o[j]);
      });
    }
    each([&](auto j) EMBER_INLINE_LAMBDA {
      out[static_cast<Index>(j) * out_stride] = finish(j, coded, o[j]);
    });
  }
};

/// The sink of N vectors at 8 lanes.
template <std::size_t N>
using Dots = DotsOf<N, Vec256>;

/// Columns per tile of dot_rows_n for N hidden rows of d of `type`: the whole row for N <= 2; 512
/// bytes of each table row for the plain types (F32, F16, BF16); about 16 KB of hidden rows in
/// whole blocks of 256 for the block types, whose decoding costs more than a tile's bookkeeping
/// (bench/README.md has the measurements behind these sizes).
[[nodiscard]] inline Index dot_tile_columns(std::size_t n, Index d, GgmlType type) noexcept {
  if (n <= 2) return d;
  const Traits t = traits(type);
  if (t.block_size == 1) return Index{512} / t.block_bytes;
  return std::max<Index>(256, Index{4096} / static_cast<Index>(n) / 256 * 256);
}

/// hsum[j · groups + g] = Σ of hidden row j (of n, h_stride apart) over columns 16g .. 16g + 15,
/// summed in column order: DotsOf's hsum.
[[nodiscard]] inline std::vector<float> hidden_group_sums(const float* h, Index h_stride,
                                                          std::size_t n, Index groups) {
  std::vector<float> hsum(static_cast<std::size_t>(groups) * n);
  for (std::size_t j = 0; j < n; ++j) {
    for (Index g = 0; g < groups; ++g) {
      const float* x = h + static_cast<Index>(j) * h_stride + 16 * g;
      float s = 0.0f;
      for (int i = 0; i < 16; ++i) s += x[i];
      hsum[j * static_cast<std::size_t>(groups) + static_cast<std::size_t>(g)] = s;
    }
  }
  return hsum;
}

/// Columns of a row fed at a time by the whole-row path of dot_rows_n, each slice with one
/// prefetch of the same columns of the next row: a multiple of every block size (32, 256), small
/// enough that the next row's slice arrives while this one is decoded (bench/README.md).
inline constexpr Index kRowSliceColumns = 256;

/// Rows shorter than this are fed whole by dot_rows_n's whole-row path and left to the hardware's
/// prefetchers, which keep up with them without being asked (bench/README.md).
inline constexpr Index kRowAskAheadMinBytes = 2048;

/// Columns [c0, c1) of row `row` (d of them) fed to dots, Unit a block type (c0, c1 whole blocks:
/// DotsOf::block) or PlainColumns (feed_plain_range): feed_range's calls in its order.
template <class Unit, class Sink>
EMBER_ALWAYS_INLINE void feed_tile(const std::uint8_t* row, Index d, Index c0, Index c1,
                                   Sink& dots) {
  if constexpr (is_plain_columns<Unit>) {
    feed_plain_range<Unit::type>(row, d, c0, c1, dots);
  } else {
    for (Index i = c0 / Unit::elements; i < c1 / Unit::elements; ++i)
      dots.template block<Unit>(row + i * Index{sizeof(Unit)}, i * Unit::elements);
  }
}

/// Groups of 16 columns whose hidden sums DotsOf takes for a row of d of unit Unit: d / 16 for the
/// block types (which add an offset per group), none for the plain types.
template <class Unit>
[[nodiscard]] constexpr Index dot_groups(Index d) noexcept {
  return is_plain_columns<Unit> ? 0 : d / 16;
}

/// The whole-row path of dot_rows_n for one type (Unit: its block, or PlainColumns) and sink Sink
/// (a DotsOf): out[j · out_stride + r] = the dot product of row r of the `count` at `rows` with
/// hidden row j of h, rows in order, each fed kRowSliceColumns at a time (a super-block the sink
/// takes whole is its own slice). With ask_ahead the same slice of the next row is asked for
/// first, so that its read overlaps the decoding of this one. A function per type, so that the
/// accumulators stay in registers (with every type's loop in one function, GCC at -O2 kept them on
/// the stack). The slices are whole blocks and multiples of 32 columns, so the sink sees the calls
/// of a row fed whole: the same bits.
template <class Unit, class Sink>
[[gnu::noinline]] void dot_whole_rows(const std::uint8_t* rows, Index row_stride, Index count,
                                      Index d, const float* h, Index h_stride, bool ask_ahead,
                                      float* out, Index out_stride) {
  constexpr bool coded = !is_plain_columns<Unit>;
  const Index groups = dot_groups<Unit>(d);
  const std::vector<float> hsum = hidden_group_sums(h, h_stride, Sink::rows, groups);
  std::vector<float> coef(static_cast<std::size_t>(groups));
  const Index row_bytes = unit_bytes<Unit>(d);
  constexpr Index slice_bytes = unit_bytes<Unit>(kRowSliceColumns);
  for (Index r = 0; r < count; ++r) {
    Sink dots{h, h_stride, hsum.data(), groups, coef.data()};
    const std::uint8_t* row = rows + r * row_stride;
    const std::uint8_t* ahead = r + 1 < count ? row + row_stride : row;
    if constexpr (coded && Sink::template takes_super<Unit>) {
      for (Index s = 0; s < d / Unit::elements; ++s) {
        if (ask_ahead) prefetch_block<sizeof(Unit)>(ahead + s * Index{sizeof(Unit)});
        dots.template block<Unit>(row + s * Index{sizeof(Unit)}, s * Unit::elements);
      }
    } else {
      for (Index c0 = 0, b0 = 0; c0 < d; c0 += kRowSliceColumns, b0 += slice_bytes) {
        if (ask_ahead) prefetch_slice(ahead, b0, std::min(row_bytes, b0 + slice_bytes));
        feed_tile<Unit>(row, d, c0, std::min(d, c0 + kRowSliceColumns), dots);
      }
    }
    dots.results(coded, out + r, out_stride);
  }
}

/// dot_rows_n in column tiles (from 3 hidden rows), for one type (Unit as dot_whole_rows): the tile
/// of the hidden rows stays in L1 while a chunk of 8 table rows passes over it, each row's
/// accumulators kept between its tiles (Sink::Kept). A fresh sink per row and tile takes the kept
/// accumulators, so that they stay in registers while the tile is fed rather than being copied
/// with the whole sink. Each row asks for every line of its next tile while it feeds this one, a
/// lead of a chunk of row tiles, so that no tile is read on demand (bench/README.md). The same feed
/// calls in the same order as a row fed whole: the same bits.
template <class Unit, class Sink>
[[gnu::noinline]] void dot_tiles(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                                 Index tile, const float* h, Index h_stride, float* out,
                                 Index out_stride) {
  constexpr bool coded = !is_plain_columns<Unit>;
  using Kept = typename Sink::Kept;
  const Index groups = dot_groups<Unit>(d);
  const std::vector<float> hsum = hidden_group_sums(h, h_stride, Sink::rows, groups);
  const Index row_bytes = unit_bytes<Unit>(d);
  constexpr Index chunk = 8;
  std::vector<float> coefs(static_cast<std::size_t>(chunk * groups));
  std::vector<Kept> kept(chunk);
  auto sink = [&](Index r) EMBER_INLINE_LAMBDA {
    return Sink{h, h_stride, hsum.data(), groups, coefs.data() + r * groups};
  };
  for (Index r0 = 0; r0 < count; r0 += chunk) {
    const Index len = std::min(chunk, count - r0);
    for (Index r = 0; r < len; ++r) sink(r).template keep<coded>(kept[static_cast<std::size_t>(r)]);
    for (Index c0 = 0; c0 < d; c0 += tile) {
      const Index c1 = std::min(d, c0 + tile);
      // The tile each row asks for while it feeds this one: its own next tile, or from the last
      // tile the first tile of the row `chunk` rows on.
      const bool last = c1 == d;
      const Index ask_c0 = last ? 0 : c1;
      const Index ask0 = row_bytes * ask_c0 / d;
      const Index ask1 = row_bytes * std::min(d, ask_c0 + tile) / d;
      const Index ask_rows = last ? chunk : 0;
      for (Index r = 0; r < len; ++r) {
        const std::uint8_t* row = rows + (r0 + r) * row_stride;
        const Index ask_row = r0 + r + ask_rows;
        if (ask_row < count) prefetch_slice(rows + ask_row * row_stride, ask0, ask1);
        Sink dots = sink(r);
        dots.template take<coded>(kept[static_cast<std::size_t>(r)]);
        feed_tile<Unit>(row, d, c0, c1, dots);
        dots.template keep<coded>(kept[static_cast<std::size_t>(r)]);
      }
    }
    for (Index r = 0; r < len; ++r) {
      Sink dots = sink(r);
      dots.template take<coded>(kept[static_cast<std::size_t>(r)]);
      dots.results(coded, out + r0 + r, out_stride);
    }
  }
}

/// dot_rows's pass of Sink::rows hidden rows (Sink a DotsOf): the type's whole-row kernel, or its
/// column tiles from 3 hidden rows (dot_tile_columns), each in a function of the type's own.
template <class Sink>
void dot_rows_n(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                const float* h, Index h_stride, float* out, Index out_stride) {
  const Index tile = dot_tile_columns(Sink::rows, d, type);
  const bool ask_ahead = detail::ggml::row_bytes(type, d) >= kRowAskAheadMinBytes;
  visit_unit(type, [&](auto unit) {
    using Unit = typename decltype(unit)::type;
    if (tile < d) {
      dot_tiles<Unit, Sink>(rows, row_stride, count, d, tile, h, h_stride, out, out_stride);
    } else {
      dot_whole_rows<Unit, Sink>(rows, row_stride, count, d, h, h_stride, ask_ahead, out,
                                 out_stride);
    }
  });
}

}  // namespace ember::inline EMBER_ISA::detail::ggml::avx2

#endif  // EMBER_DETAIL_GGML_AVX2

/// The integer dot products of tied logits with quantized hidden rows: hidden rows rounded to
/// 8-bit codes (ggml's Q8_0 / Q8_1 / Q8_K, or ember's own for int8 rows) in the layout the kernels
/// read, the one summation order every instruction set computes (so AVX-512 VNNI, AVX2 and the
/// portable loops give the same bits), and the portable kernels, the reference the others are
/// tested against.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

// ---- the summation order -----------------------------------------------------------------------
//
// Two shapes of weight row, each with exact integer parts and one fixed float order:
//
// Units (ggml's 32-element blocks Q4_0 ... Q8_0, and the int8 row codec in units of 32): unit u
// of a row has codes w (unsigned bytes) standing for (w - k) · dw (+ mw: the offset types), the
// hidden row codes h with scale dh (and, for the offset types, y = the hidden's sum over the
// unit times its scale). I_u = Σ (w - k) · h is exact (int32); then, u increasing,
//   F[u mod 16] += rounded(float(I_u) · rounded(dw · dh))
//   G[u mod 16] += rounded(mw · y)                                      (offset types only)
// Super-blocks (Q2_K ... Q6_K, Q8_K hidden): super-block s of 256 elements is 4 chunks of 64;
// lane l (0..15) of chunk c holds elements 64c + 4l .. 64c + 4l + 3, whose 16-element sub-block
// 4c + l/4 has the integer scale sc. With bsum[l] the hidden's sum over sub-block l,
//   V[l] = Σ_c sc(4c + l/4) · Σ_e w · h  -  k · sc(l) · bsum[l]          (exact, int32)
//   F[l] += rounded(float(V[l]) · rounded(d · dh))
//   G[l] += rounded(float(m(l) · bsum[l]) · rounded(-dmin · dh))       (types with mins)
// The row's dot product is tree(F) (+ tree(G)), tree(x) = t2[0] + t2[1] with t8[i] = x[i] +
// x[i + 8], t4[i] = t8[i] + t8[i + 4], t2[i] = t4[i] + t4[i + 2]. Against the exact value of the
// same integers and scales, a logit is off by at most (terms per lane + 6) · 2⁻²⁴ · Σ |terms|.

/// Writes unit u's 32 codes (element e = code e) at its place in a units-layout row.
inline void put_unit_codes(std::int8_t* row_groups, Index u, const std::int8_t* q) noexcept {
  std::int8_t* g = row_groups + (u / qdot_lanes) * qdot_group;
  const Index lane = u % qdot_lanes;
  for (Index e = 0; e < qdot_unit; ++e) g[(e / 4) * 64 + lane * 4 + e % 4] = q[e];
}

/// Stores unit u of hidden row j of a units layout from its 32 codes at qs and its scale: the
/// codes, their sum (also returned) and the scale.
inline std::int32_t put_unit(QuantizedHidden& q, Index j, Index u, const std::uint8_t* qs,
                             float scale) noexcept {
  std::int8_t c[qdot_unit];
  std::memcpy(c, qs, sizeof c);
  put_unit_codes(q.group_codes(j, 0), u, c);
  std::int32_t sum = 0;
  for (const std::int8_t v : c) sum += v;
  q.group_isum(j, u / qdot_lanes)[u % qdot_lanes] = sum;
  q.unit_scales(j, u / qdot_lanes)[u % qdot_lanes] = scale;
  return sum;
}

/// Code e of unit u of a units-layout group.
[[nodiscard]] inline int unit_code(const std::int8_t* group, Index lane, Index e) noexcept {
  return group[(e / 4) * 64 + lane * 4 + e % 4];
}

/// tree(x) of the summation order above.
[[nodiscard]] inline float lane_tree(const float* x) noexcept {
  float t8[8];
  for (int i = 0; i < 8; ++i) t8[i] = x[i] + x[i + 8];
  float t4[4];
  for (int i = 0; i < 4; ++i) t4[i] = t8[i] + t8[i + 4];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/// The row loop of the vector kernels: the `count` rows at `rows` in for_rows_in_parts's order
/// over `parts` parts. For each row, N accumulators f and gx of type V zeroed,
/// acc(row, ahead, f, gx), then out[j·out_stride + r] = Tree(f[j]) (+ Tree(gx[j]) with Extra),
/// Tree the ISA's lane_tree: each row's result does not depend on the order the rows are taken in.
/// `ahead` is the row stream_lead_rows on from it (the row itself near the end), which acc asks
/// for a slice per block it decodes (prefetch_slice; whole rows asked for at once, into the first
/// level, were slower: bench/README.md).
template <class V, auto Tree, bool Extra, Index N, class Acc>
EMBER_ALWAYS_INLINE void each_row(const std::uint8_t* rows, Index row_stride, Index count,
                                  Index parts, float* out, Index out_stride, const Acc& acc) {
  const Index lead = stream_lead_rows(row_stride);
  for_rows_in_parts(count, parts, [&](Index r) EMBER_INLINE_LAMBDA {
    const std::uint8_t* row = rows + r * row_stride;
    V f[static_cast<std::size_t>(N)] = {};
    V gx[static_cast<std::size_t>(N)] = {};
    acc(row, r + lead < count ? row + lead * row_stride : row, f, gx);
    EMBER_UNROLL for (Index j = 0; j < N; ++j) {
      float result = Tree(f[j]);
      if constexpr (Extra) result += Tree(gx[j]);
      out[j * out_stride + r] = result;
    }
  });
}

/// One unit of a weight row as the portable kernel reads it: 32 unsigned codes standing for
/// (w - offset) · dw (+ mw).
struct WeightUnit {
  std::uint8_t w[qdot_unit];
  float dw;
  float mw;
};

/// One super-block of a weight row for the portable kernel: 256 unsigned codes standing for
/// sc(sub-block) · (w - offset) · d - m(sub-block) · dmin, sub-blocks of 16.
struct WeightSuperBlock {
  std::uint8_t w[qdot_super];
  std::int32_t sc[16];
  std::int32_t m[16];
  float d;
  float dmin;
};

/// The portable kernel over units: out[j·out_stride + r] for the `count` rows at `rows` (stride
/// bytes apart) and hidden rows j0 .. j0 + nj. `unit(row, u, WeightUnit&)` decodes unit u of a
/// row; Offset is the code offset k, Extra whether the type has the offset term.
template <int Offset, bool Extra, class UnitOf>
void qdot_units_portable(const UnitOf& unit, const std::uint8_t* rows, Index row_stride,
                         Index count, Index units, const QuantizedHidden& h, Index j0, Index nj,
                         float* out, Index out_stride) {
  std::unique_ptr<WeightUnit[]> row_units(new WeightUnit[static_cast<std::size_t>(units)]);
  for (Index r = 0; r < count; ++r) {
    const std::uint8_t* row = rows + r * row_stride;
    for (Index u = 0; u < units; ++u) unit(row, u, row_units[static_cast<std::size_t>(u)]);
    for (Index j = j0; j < j0 + nj; ++j) {
      float f[qdot_lanes] = {};
      float g[qdot_lanes] = {};
      for (Index u = 0; u < units; ++u) {
        const WeightUnit& wu = row_units[static_cast<std::size_t>(u)];
        const Index grp = u / qdot_lanes;
        const Index lane = u % qdot_lanes;
        const std::int8_t* hq = h.group_codes(j, grp);
        std::int32_t i = -Offset * h.group_isum(j, grp)[lane];
        for (Index e = 0; e < qdot_unit; ++e) i += wu.w[e] * unit_code(hq, lane, e);
        const float s = wu.dw * h.unit_scales(j, grp)[lane];
        f[lane] += rounded(static_cast<float>(i) * s);
        if constexpr (Extra) g[lane] += rounded(wu.mw * h.group_extra(j, grp)[lane]);
      }
      float result = lane_tree(f);
      if constexpr (Extra) result += lane_tree(g);
      out[(j - j0) * out_stride + r] = result;
    }
  }
}

/// The portable kernel over super-blocks; `block(row, s, WeightSuperBlock&)` decodes super-block
/// s of a row; Offset is the code offset k, Mins whether the type has mins.
template <int Offset, bool Mins, class BlockOf>
void qdot_super_portable(const BlockOf& block, const std::uint8_t* rows, Index row_stride,
                         Index count, Index supers, const QuantizedHidden& h, Index j0, Index nj,
                         float* out, Index out_stride) {
  std::unique_ptr<WeightSuperBlock[]> row_blocks(
      new WeightSuperBlock[static_cast<std::size_t>(supers)]);
  for (Index r = 0; r < count; ++r) {
    const std::uint8_t* row = rows + r * row_stride;
    for (Index s = 0; s < supers; ++s) block(row, s, row_blocks[static_cast<std::size_t>(s)]);
    for (Index j = j0; j < j0 + nj; ++j) {
      float f[qdot_lanes] = {};
      float g[qdot_lanes] = {};
      for (Index s = 0; s < supers; ++s) {
        const WeightSuperBlock& b = row_blocks[static_cast<std::size_t>(s)];
        const std::int8_t* hq = h.group_codes(j, s);
        const std::int32_t* bsum = h.group_isum(j, s);
        const float dh = *h.super_scale(j, s);
        for (int l = 0; l < 16; ++l) {
          std::int32_t v = -Offset * b.sc[l] * bsum[l];
          for (int c = 0; c < 4; ++c) {
            std::int32_t part = 0;
            for (int e = 0; e < 4; ++e) part += b.w[64 * c + 4 * l + e] * hq[64 * c + 4 * l + e];
            v += b.sc[4 * c + l / 4] * part;
          }
          f[l] += rounded(static_cast<float>(v) * (b.d * dh));
          if constexpr (Mins) {
            g[l] += rounded(static_cast<float>(b.m[l] * bsum[l]) * (-b.dmin * dh));
          }
        }
      }
      float result = lane_tree(f);
      if constexpr (Mins) result += lane_tree(g);
      out[(j - j0) * out_stride + r] = result;
    }
  }
}

}  // namespace ember::inline EMBER_ISA::detail

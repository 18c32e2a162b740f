// The quantized-hidden kernels of every instruction set this unit is built for against the
// portable ones, bit for bit (binaries ember_native_tests, built with -march=native, and
// ember_avx2_tests, built for AVX2 and run on an emulated Haswell too): every block type on
// N(0, 1) rows and on random block bytes (NaN and infinite scales included), every pass size,
// widths with a partial last group of 16 units, the int8 rows and the F16 / BF16 float kernels.
// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/codec/detail/int8_dot.hpp"
#include "ember/detail/float_dots.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/ggml/encode.hpp"
#include "ember/ggml/quant_dot.hpp"
#include "ember/random.hpp"

namespace gg = ember::detail::ggml;
using ember::GgmlType;
using ember::Index;

namespace {

/// The same bits, or both NaN.
bool qdot_same(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

std::vector<float> qdot_normal(Index n, std::uint64_t seed) {
  ember::Random rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

/// Runs `kernel(j0, nj, out)` over n hidden rows in passes of 8.
template <class K>
std::vector<float> qdot_passes(Index n, Index rows, K kernel) {
  std::vector<float> out(static_cast<std::size_t>(n * rows), -7.0f);
  for (Index j0 = 0; j0 < n; j0 += 8)
    kernel(j0, std::min<Index>(8, n - j0), out.data() + j0 * rows);
  return out;
}

}  // namespace

TEST_CASE("the quantized-hidden kernels of this build give the portable kernels' bits",
          "[ggml_dot][kernels][native]") {
  INFO("VNNI kernels: " << EMBER_DETAIL_GGML_AVX512VNNI
                        << ", AVX2 kernels: " << EMBER_DETAIL_GGML_AVX2);
  const Index rows = 5;
  for (const GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    for (const Index d : {Index{256}, Index{768}, Index{1536}}) {  // 8, 24, 48 units
      for (const bool random_bytes : {false, true}) {
        INFO(to_string(t) << " d = " << d << (random_bytes ? " random bytes" : ""));
        const Index rb = ember::ggml_row_size(t, d);
        std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * rb));
        if (random_bytes) {
          ember::Random rng(static_cast<std::uint64_t>(d) + 17);
          for (auto& b : q) b = static_cast<std::uint8_t>(rng.next_u64() >> 56);
        } else {
          const std::vector<float> w = qdot_normal(rows * d, 3);
          for (Index r = 0; r < rows; ++r) gg::quantize(t, w.data() + r * d, d, q.data() + r * rb);
        }
        const Index n = 9;
        const std::vector<float> h = qdot_normal(n * d, 4);
        const auto qh = gg::quantize_hidden(t, h.data(), d, n, d);
        const auto built = qdot_passes(n, rows, [&](Index j0, Index nj, float* out) {
          gg::qdot_rows(t, q.data(), rb, rows, d, qh, j0, nj, out, rows,
                        ember::detail::default_row_parts());
        });
        // The rows in 1 and 4 parts (default_row_parts(): the vendor's choice).
        for (const Index parts : {Index{1}, Index{4}}) {
          INFO(parts << " parts");
          CHECK(qdot_same(qdot_passes(n, rows,
                                      [&](Index j0, Index nj, float* out) {
                                        gg::qdot_rows(t, q.data(), rb, rows, d, qh, j0, nj, out,
                                                      rows, parts);
                                      }),
                          built));
        }
        gg::visit_block(t, [&](auto block) {
          using B = typename decltype(block)::type;
          const auto portable = qdot_passes(n, rows, [&](Index j0, Index nj, float* out) {
            gg::portable::qdot_block_rows<B>(q.data(), rb, rows, d, qh, j0, nj, out, rows);
          });
          CHECK(qdot_same(built, portable));
#if EMBER_DETAIL_GGML_AVX512VNNI && EMBER_DETAIL_GGML_AVX2
          const auto avx2 = qdot_passes(n, rows, [&](Index j0, Index nj, float* out) {
            gg::simd_block_rows<B>(gg::avx2::Isa{}, q.data(), rb, rows, d, qh, j0, nj, out, rows);
          });
          CHECK(qdot_same(avx2, portable));
#endif
        });
      }
    }
  }
}

TEST_CASE("the int8-row and 16-bit kernels of this build give the portable bits",
          "[ggml_dot][kernels][native]") {
  const Index rows = 7;  // odd: the kernels' last row of a pair alone
  const Index n = 9;
  for (const Index d : {Index{64}, Index{100}, Index{520}, Index{2080}}) {  // 2080: 3 tiles
    INFO("d = " << d);
    // Int8 rows: codes, then the float scale and bias.
    const Index rb = d + 8;
    std::vector<std::uint8_t> rows8(static_cast<std::size_t>(rows * rb));
    ember::Random rng(static_cast<std::uint64_t>(d));
    for (Index r = 0; r < rows; ++r) {
      for (Index c = 0; c < d; ++c)
        rows8[static_cast<std::size_t>(r * rb + c)] =
            static_cast<std::uint8_t>(rng.next_u64() >> 56);
      const float scale = 0.01f * static_cast<float>(r + 1);
      const float bias = -1.5f + static_cast<float>(r);
      std::memcpy(rows8.data() + r * rb + d, &scale, 4);
      std::memcpy(rows8.data() + r * rb + d + 4, &bias, 4);
    }
    const std::vector<float> h = qdot_normal(n * d, 5);
    const auto qh = ember::detail::int8_rows_hidden(h.data(), d, n, d);
    const auto built = qdot_passes(n, rows, [&](Index j0, Index nj, float* out) {
      ember::detail::int8_rows_qdot(rows8.data(), rb, rows, d, qh, j0, nj, out, rows,
                                    ember::detail::default_row_parts());
    });
    const auto portable = qdot_passes(n, rows, [&](Index j0, Index nj, float* out) {
      ember::detail::qdot_units_portable<0, true>(
          [d](const std::uint8_t* row, Index u, ember::detail::WeightUnit& wu) {
            for (Index e = 0; e < 32; ++e) wu.w[e] = 32 * u + e < d ? row[32 * u + e] : 0;
            ember::detail::int8_row_params(row, d, wu.dw, wu.mw);
          },
          rows8.data(), rb, rows, (d + 31) / 32, qh, j0, nj, out, rows);
    });
    CHECK(qdot_same(built, portable));
    for (const Index parts : {Index{1}, Index{4}}) {
      INFO(parts << " parts");
      CHECK(qdot_same(qdot_passes(n, rows,
                                  [&](Index j0, Index nj, float* out) {
                                    ember::detail::int8_rows_qdot(rows8.data(), rb, rows, d, qh, j0,
                                                                  nj, out, rows, parts);
                                  }),
                      portable));
    }
    // F16 and BF16 rows with hidden rows rounded to their type: exact products.
    for (const GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
      INFO(to_string(t));
      const std::vector<float> w = qdot_normal(rows * d, 6);
      std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * 2 * d));
      for (Index r = 0; r < rows; ++r) gg::quantize(t, w.data() + r * d, d, q.data() + r * 2 * d);
      const auto hv = gg::quantize_hidden(t, h.data(), d, n, d);
      const auto vec = qdot_passes(n, rows, [&](Index j0, Index nj, float* out) {
        gg::qdot_rows(t, q.data(), 2 * d, rows, d, hv, j0, nj, out, rows,
                      ember::detail::default_row_parts());
      });
      std::vector<float> loops(static_cast<std::size_t>(n * rows));
      for (Index j = 0; j < n; ++j) {
        for (Index r = 0; r < rows; ++r) {
          float lanes[32] = {};
          for (Index c = 0; c < d; ++c) {
            const std::uint8_t* p = q.data() + r * 2 * d + 2 * c;
            const auto bits = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
            const float wv = t == GgmlType::F16 ? gg::fp16_to_fp32(bits) : gg::bf16_to_fp32(bits);
            lanes[c % 32] += wv * hv.row_values(j)[c];
          }
          loops[static_cast<std::size_t>(j * rows + r)] = ember::detail::tree32(lanes);
        }
      }
      CHECK(qdot_same(vec, loops));
    }
  }
}

#if EMBER_DETAIL_FLOAT_DOTS_AVX2  // x86 builds with AVX2 and FMA: products fused
TEST_CASE("the plain float kernel of this build sums each lane in column order, fused",
          "[ggml_dot][kernels][native]") {
  // float_row_dots over float rows (the exact logits of Embedding<float> for up to 8 hidden rows):
  // lane c mod 32 accumulates fma(w, h) in increasing c, then tree32, for every pass size, odd
  // row counts (whole and partial groups of rows read side by side) and widths of one tile and
  // of several, with a tail (8224: one and two hidden rows in tiles too).
  for (const Index d : {Index{40}, Index{544}, Index{2080}, Index{8224}}) {
    for (const Index rows : {Index{1}, Index{7}, Index{18}}) {
      const std::vector<float> w = qdot_normal(rows * d, 8);
      const std::vector<float> h = qdot_normal(9 * d, 9);
      for (Index n = 1; n <= 8; ++n) {
        INFO("d = " << d << " rows = " << rows << " n = " << n);
        std::vector<float> got(static_cast<std::size_t>(n * rows), -7.0f);
        ember::detail::float_row_dots(ember::detail::F32Element{},
                                      reinterpret_cast<const std::uint8_t*>(w.data()), 4 * d, rows,
                                      d, h.data(), d, n, got.data(), rows);
        std::vector<float> want(got.size());
        for (Index j = 0; j < n; ++j) {
          for (Index r = 0; r < rows; ++r) {
            float lanes[32] = {};
            for (Index c = 0; c < d; ++c) {
              const std::size_t at = static_cast<std::size_t>(c % 32);
              lanes[at] = std::fma(w[static_cast<std::size_t>(r * d + c)],
                                   h[static_cast<std::size_t>(j * d + c)], lanes[at]);
            }
            want[static_cast<std::size_t>(j * rows + r)] = ember::detail::tree32(lanes);
          }
        }
        CHECK(qdot_same(got, want));
      }
    }
  }
}
#endif

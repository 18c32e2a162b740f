// ggml's dot-product types and the integer kernels of LogitsMode::quantized_hidden (ember/ggml/
// hidden.hpp, quant_dot.hpp): the hidden rows rounded byte for byte as ggml's reference quantizers
// round them (golden files of tests/data/ggml/, see the README there), each weight type's dot
// type as ggml-cpu's table gives it, the kernels of this build within the documented bound of
// the int64 reference of support/lm_head_reference.hpp, batch- and split-invariant, and the exact
// kernels' summation order unchanged by their passes of 8.
// SPDX-License-Identifier: MIT
#include "ember/ggml/quant_dot.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/ggml/encode.hpp"
#include "ember/ggml/exact_dot.hpp"
#include "ember/random.hpp"
#include "support/ggml_inputs.hpp"
#include "support/io_files.hpp"
#include "support/lm_head_reference.hpp"

namespace {

namespace gg = ember::detail::ggml;
using ember::GgmlType;
using ember::Index;

/// The block types and F16/BF16: every type with a dot type of its own.
constexpr GgmlType quantized_types[] = {
    GgmlType::F16,  GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
    GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::BF16};

std::vector<float> normal_values(Index n, std::uint64_t seed, double scale = 1.0) {
  ember::Random rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

/// `rows` rows of d N(0, 1) values encoded as t.
std::vector<std::uint8_t> encoded_rows(GgmlType t, Index rows, Index d, std::uint64_t seed) {
  const std::vector<float> w = normal_values(rows * d, seed);
  const Index rb = ember::ggml_row_size(t, d);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * rb));
  for (Index r = 0; r < rows; ++r) gg::quantize(t, w.data() + r * d, d, q.data() + r * rb);
  return q;
}

/// out[j][r] of qdot_rows for n hidden rows in passes of 8.
std::vector<float> quantized_logits(GgmlType t, const std::vector<std::uint8_t>& q, Index rows,
                                    Index d, const std::vector<float>& h, Index n) {
  const ember::detail::QuantizedHidden qh = gg::quantize_hidden(t, h.data(), d, n, d);
  std::vector<float> out(static_cast<std::size_t>(n * rows));
  const Index rb = ember::ggml_row_size(t, d);
  for (Index j0 = 0; j0 < n; j0 += 8) {
    gg::qdot_rows(t, q.data(), rb, rows, d, qh, j0, std::min<Index>(8, n - j0),
                  out.data() + j0 * rows, rows);
  }
  return out;
}

}  // namespace

TEST_CASE("ggml dot: Q8_0, Q8_1 and Q8_K hidden rows are ggml's reference bytes", "[ggml_dot]") {
  const std::vector<float> x = ember_test::ggml_common_rows();
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
    INFO(to_string(t));
    const auto bytes = ember_test::read_bytes(
        ember_test::data_file("ggml/hidden_" + std::string(to_string(t)) + ".bin"));
    REQUIRE(bytes.size() > 24);
    REQUIRE(std::string(bytes.begin(), bytes.begin() + 8) == "EMBGGMLQ");
    std::uint32_t head[4];
    std::memcpy(head, bytes.data() + 8, sizeof head);
    REQUIRE(head[0] == static_cast<std::uint32_t>(t));
    REQUIRE(head[2] == ember_test::ggml_row_len);
    REQUIRE(head[3] == static_cast<std::uint32_t>(ember::ggml_row_size(t, 256)));
    REQUIRE(bytes.size() == 24 + std::size_t{head[1]} * head[3]);
    std::vector<std::uint8_t> q(head[3]);
    for (std::uint32_t r = 0; r < head[1]; ++r) {
      INFO("input row " << r);
      gg::quantize_dot_type(t, x.data() + std::size_t{r} * 256, 256, q.data());
      CHECK(std::memcmp(q.data(), bytes.data() + 24 + std::size_t{r} * head[3], head[3]) == 0);
    }
  }
}

TEST_CASE("ggml dot: each weight type's hidden rows take ggml-cpu's vec_dot_type", "[ggml_dot]") {
  // type_traits_cpu of ggml-cpu.c
  CHECK(gg::dot_type(GgmlType::F32) == GgmlType::F32);
  CHECK(gg::dot_type(GgmlType::F16) == GgmlType::F16);
  CHECK(gg::dot_type(GgmlType::BF16) == GgmlType::BF16);
  for (const GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0})
    CHECK(gg::dot_type(t) == GgmlType::Q8_0);
  for (const GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1})
    CHECK(gg::dot_type(t) == GgmlType::Q8_1);
  for (const GgmlType t :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    CHECK(gg::dot_type(t) == GgmlType::Q8_K);
}

TEST_CASE("ggml dot: quantized dot products are the int64 reference within the documented bound",
          "[ggml_dot]") {
  for (const GgmlType t : quantized_types) {
    for (const Index d : {Index{256}, Index{768}, Index{4096}}) {
      INFO(to_string(t) << " d = " << d);
      const Index rows = 9;
      const Index n = 9;
      const auto q = encoded_rows(t, rows, d, 3 + static_cast<std::uint64_t>(d));
      const std::vector<float> h = normal_values(n * d, 70);
      const std::vector<float> out = quantized_logits(t, q, rows, d, h, n);
      const Index rb = ember::ggml_row_size(t, d);
      for (Index j = 0; j < n; ++j) {
        for (Index r = 0; r < rows; ++r) {
          const ember_test::QuantizedDot ref =
              ember_test::quantized_dot_reference(t, q.data() + r * rb, h.data() + j * d, d);
          const double got = out[static_cast<std::size_t>(j * rows + r)];
          const double err = std::fabs(got - static_cast<double>(ref.value));
          if (err > ref.bound()) {
            FAIL_CHECK("row " << r << " hidden " << j << ": " << got << " vs "
                              << static_cast<double>(ref.value) << ", bound " << ref.bound());
          }
        }
      }
    }
  }
}

TEST_CASE(
    "ggml dot: a logit does not depend on the other hidden rows of its pass or on the rows "
    "around it",
    "[ggml_dot]") {
  const Index d = 512;
  const Index rows = 21;  // odd, and more than one chunk of a row split
  for (const GgmlType t : quantized_types) {
    INFO(to_string(t));
    const auto q = encoded_rows(t, rows, d, 5);
    const std::vector<float> h = normal_values(64 * d, 71);
    const std::vector<float> all = quantized_logits(t, q, rows, d, h, 64);
    const Index rb = ember::ggml_row_size(t, d);
    for (const Index n : {Index{1}, Index{2}, Index{3}, Index{5}, Index{8}, Index{9}}) {
      // The first n hidden rows alone, over rows 3 .. 20 only: the same bits.
      const std::vector<float> h_n(h.begin(), h.begin() + n * d);
      const auto qh = gg::quantize_hidden(t, h_n.data(), d, n, d);
      std::vector<float> part(static_cast<std::size_t>(n * (rows - 3)));
      for (Index j0 = 0; j0 < n; j0 += 8) {
        gg::qdot_rows(t, q.data() + 3 * rb, rb, rows - 3, d, qh, j0, std::min<Index>(8, n - j0),
                      part.data() + j0 * (rows - 3), rows - 3);
      }
      for (Index j = 0; j < n; ++j) {
        for (Index r = 3; r < rows; ++r) {
          const float a = all[static_cast<std::size_t>(j * rows + r)];
          const float b = part[static_cast<std::size_t>(j * (rows - 3) + r - 3)];
          CHECK(std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b));
        }
      }
    }
  }
}

TEST_CASE("ggml dot: the exact kernels' passes of 8 keep the order of their passes of 4",
          "[ggml_dot]") {
  // dot_rows always summed a vector of a pass of 1 or 2 into two alternating accumulators and one
  // of a pass of 3 or 4 into one: one pass of up to 8 keeps each quarter's order. At d = 2304
  // passes of 3 to 8 take columns in tiles of different widths (512 to 1280, the last one short),
  // which must not change the order either.
  const Index rows = 7;
  for (const Index d : {Index{512}, Index{2304}}) {
    for (const GgmlType t : gg::codec_types) {
      const auto q = encoded_rows(t, rows, d, 9);
      const Index rb = ember::ggml_row_size(t, d);
      const std::vector<float> h = normal_values(11 * d, 72);
      for (Index n = 1; n <= 11; ++n) {
        INFO(to_string(t) << " d = " << d << " n = " << n);
        std::vector<float> once(static_cast<std::size_t>(n * rows));
        gg::dot_rows(t, q.data(), rb, rows, d, h.data(), d, n, once.data(), rows);
        std::vector<float> fours(static_cast<std::size_t>(n * rows));
        for (Index j0 = 0; j0 < n; j0 += 4) {
          gg::dot_rows(t, q.data(), rb, rows, d, h.data() + j0 * d, d, std::min<Index>(4, n - j0),
                       fours.data() + j0 * rows, rows);
        }
        CHECK(std::memcmp(once.data(), fours.data(), once.size() * sizeof(float)) == 0);
      }
    }
  }
}

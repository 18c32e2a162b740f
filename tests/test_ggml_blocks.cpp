// ggml's block formats (ember/ggml/) and io::GgmlType (io/ggml_type.hpp): quantization
// byte for byte and dequantization bit for bit against ggml's own reference code (the golden files
// of tests/data/ggml/, see the README there), the fp16/bf16 conversions against Eigen, the fused
// row dot product against its documented order, round-trip error bounds and the preconditions.
#include "ember/ggml/decode.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/ggml/encode.hpp"
#include "ember/io/ggml_type.hpp"
#include "ember/random.hpp"
#include "support/ggml_inputs.hpp"
#include "support/io_files.hpp"

namespace {

namespace gg = ember::detail::ggml;
using ember::io::GgmlType;
using Type = ember::GgmlType;
using ember::Index;

/// One golden file of tests/data/ggml/ (layout in its README).
struct Golden {
  std::uint32_t type = 0;
  std::uint32_t rows = 0;
  std::uint32_t row_len = 0;
  std::uint32_t row_bytes = 0;
  std::vector<std::uint8_t> quantized;    // rows x row_bytes
  std::vector<std::uint64_t> row_hashes;  // FNV-1a of ggml's dequantization, per row
  std::uint32_t random_blocks = 0;
  std::uint64_t random_hash = 0;
};

Golden read_golden(Type type) {
  const auto bytes = ember_test::read_bytes(
      ember_test::data_file("ggml/" + std::string(gg::traits(type).name) + ".bin"));
  REQUIRE(bytes.size() > 24);
  REQUIRE(std::string(bytes.begin(), bytes.begin() + 8) == "EMBGGML1");
  std::size_t at = 8;
  auto u32 = [&] {
    REQUIRE(at + 4 <= bytes.size());
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k)
      v |= static_cast<std::uint32_t>(bytes[at + static_cast<std::size_t>(k)]) << (8 * k);
    at += 4;
    return v;
  };
  auto u64 = [&] {
    const std::uint64_t lo = u32();
    const std::uint64_t hi = u32();
    return lo | (hi << 32);
  };
  Golden g;
  g.type = u32();
  g.rows = u32();
  g.row_len = u32();
  g.row_bytes = u32();
  const std::size_t payload = std::size_t{g.rows} * g.row_bytes;
  REQUIRE(at + payload <= bytes.size());
  g.quantized.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                     bytes.begin() + static_cast<std::ptrdiff_t>(at + payload));
  at += payload;
  for (std::uint32_t r = 0; r < g.rows; ++r) g.row_hashes.push_back(u64());
  g.random_blocks = u32();
  g.random_hash = u64();
  REQUIRE(at == bytes.size());
  return g;
}

/// Byte offsets of the fp16 scale fields of one block (kept finite in the random-byte inputs).
std::vector<std::size_t> half_fields(Type t) {
  switch (t) {
    case Type::Q4_0:
    case Type::Q5_0:
    case Type::Q8_0:
      return {0};
    case Type::Q4_1:
    case Type::Q5_1:
    case Type::Q4_K:
    case Type::Q5_K:
      return {0, 2};
    case Type::Q2_K:
      return {80, 82};
    case Type::Q3_K:
      return {108};
    case Type::Q6_K:
      return {208};
    default:
      return {};
  }
}

bool is_plain(Type t) { return t == Type::F32 || t == Type::F16 || t == Type::BF16; }

}  // namespace

TEST_CASE("ggml: GgmlType carries ggml's ids, names, block sizes and block bytes", "[ggml]") {
  CHECK(static_cast<std::uint32_t>(GgmlType::F32) == 0);
  CHECK(static_cast<std::uint32_t>(GgmlType::F16) == 1);
  CHECK(static_cast<std::uint32_t>(GgmlType::Q4_0) == 2);
  CHECK(static_cast<std::uint32_t>(GgmlType::Q5_0) == 6);
  CHECK(static_cast<std::uint32_t>(GgmlType::Q8_1) == 9);
  CHECK(static_cast<std::uint32_t>(GgmlType::Q6_K) == 14);
  CHECK(static_cast<std::uint32_t>(GgmlType::IQ4_XS) == 23);
  CHECK(static_cast<std::uint32_t>(GgmlType::F64) == 28);
  CHECK(static_cast<std::uint32_t>(GgmlType::BF16) == 30);
  CHECK(static_cast<std::uint32_t>(GgmlType::TQ1_0) == 34);
  CHECK(static_cast<std::uint32_t>(GgmlType::MXFP4) == 39);
  CHECK(static_cast<std::uint32_t>(GgmlType::Q2_0) == 42);

  // Removed ids are not types, nor anything past the last one.
  for (const std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xFFFFFFFFu}) {
    INFO("id " << id);
    CHECK_FALSE(ember::io::ggml_type_known(id));
    CHECK(ember::io::ggml_block_size(static_cast<GgmlType>(id)) == 0);
    CHECK(ember::io::ggml_type_size(static_cast<GgmlType>(id)) == 0);
    CHECK(to_string(static_cast<GgmlType>(id)) == "unknown");
  }
  int known = 0;
  for (std::uint32_t id = 0; id < 64; ++id) known += ember::io::ggml_type_known(id) ? 1 : 0;
  CHECK(known == 35);

  struct Row {
    GgmlType t;
    const char* name;
    Index block, bytes;
  };
  // Sizes as sizeof(block_*) of ggml-common.h.
  const Row rows[] = {
      {GgmlType::F32, "f32", 1, 4},         {GgmlType::F16, "f16", 1, 2},
      {GgmlType::BF16, "bf16", 1, 2},       {GgmlType::Q4_0, "q4_0", 32, 18},
      {GgmlType::Q4_1, "q4_1", 32, 20},     {GgmlType::Q5_0, "q5_0", 32, 22},
      {GgmlType::Q5_1, "q5_1", 32, 24},     {GgmlType::Q8_0, "q8_0", 32, 34},
      {GgmlType::Q8_1, "q8_1", 32, 36},     {GgmlType::Q2_K, "q2_K", 256, 84},
      {GgmlType::Q3_K, "q3_K", 256, 110},   {GgmlType::Q4_K, "q4_K", 256, 144},
      {GgmlType::Q5_K, "q5_K", 256, 176},   {GgmlType::Q6_K, "q6_K", 256, 210},
      {GgmlType::Q8_K, "q8_K", 256, 292},   {GgmlType::IQ2_XXS, "iq2_xxs", 256, 66},
      {GgmlType::IQ4_NL, "iq4_nl", 32, 18}, {GgmlType::I64, "i64", 1, 8},
      {GgmlType::TQ2_0, "tq2_0", 256, 66},  {GgmlType::MXFP4, "mxfp4", 32, 17},
      {GgmlType::NVFP4, "nvfp4", 64, 36},   {GgmlType::Q1_0, "q1_0", 128, 18},
  };
  for (const Row& r : rows) {
    INFO(r.name);
    CHECK(to_string(r.t) == r.name);
    CHECK(ember::io::ggml_block_size(r.t) == r.block);
    CHECK(ember::io::ggml_type_size(r.t) == r.bytes);
    CHECK(ember::io::ggml_row_size(r.t, 4 * r.block) == 4 * r.bytes);
    const gg::Traits tr = gg::traits(r.t);
    CHECK(tr.block_size == r.block);
    CHECK(tr.block_bytes == r.bytes);
    CHECK(tr.name == r.name);
  }
  static_assert(ember::io::ggml_type_known(12) &&
                ember::io::ggml_block_size(GgmlType::Q4_K) == 256);
}

TEST_CASE("ggml: ember decodes exactly the 13 types of the codec table", "[ggml]") {
  int n = 0;
  for (std::uint32_t id = 0; id < 64; ++id) {
    const auto t = static_cast<Type>(id);
    if (gg::decodes(t)) {
      ++n;
      CHECK(ember::io::ggml_type_known(id));
    }
  }
  CHECK(n == 13);
  for (const GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::IQ2_XXS, GgmlType::IQ4_NL,
                           GgmlType::I8, GgmlType::I32, GgmlType::F64, GgmlType::TQ1_0,
                           GgmlType::MXFP4, GgmlType::NVFP4, GgmlType::Q1_0, GgmlType::Q2_0}) {
    CHECK_FALSE(gg::traits(t).decodes);
    CHECK_FALSE(ember::io::ggml_type_decodes(t));
  }
}

TEST_CASE(
    "ggml: quantize gives ggml's reference bytes and dequantize ggml's floats on the golden inputs",
    "[ggml]") {
  const std::vector<float> common = ember_test::ggml_common_rows();
  const std::vector<float> special = ember_test::ggml_special_row();
  for (const Type t : gg::codec_types) {
    INFO("type " << gg::traits(t).name);
    const Golden g = read_golden(t);
    REQUIRE(g.type == static_cast<std::uint32_t>(t));
    REQUIRE(g.row_len == ember_test::ggml_row_len);
    REQUIRE(g.row_bytes == static_cast<std::uint32_t>(gg::row_bytes(t, ember_test::ggml_row_len)));
    std::vector<float> x = common;
    if (is_plain(t)) x.insert(x.end(), special.begin(), special.end());
    REQUIRE(g.rows == x.size() / ember_test::ggml_row_len);

    std::vector<std::uint8_t> q(g.row_bytes);
    std::vector<float> y(ember_test::ggml_row_len);
    for (std::uint32_t r = 0; r < g.rows; ++r) {
      INFO("input row " << r);
      gg::quantize(t, x.data() + r * ember_test::ggml_row_len,
                   static_cast<Index>(ember_test::ggml_row_len), q.data());
      const std::uint8_t* want = g.quantized.data() + std::size_t{r} * g.row_bytes;
      std::size_t first = g.row_bytes;
      for (std::size_t k = 0; k < g.row_bytes; ++k) {
        if (q[k] != want[k]) {
          first = k;
          break;
        }
      }
      if (first != g.row_bytes)
        FAIL_CHECK("quantized bytes differ from ggml's from byte " << first);
      gg::decode_row(t, want, static_cast<Index>(ember_test::ggml_row_len), y.data());
      CHECK(ember_test::ggml_fnv1a(y.data(), y.size()) == g.row_hashes[r]);
    }
    // The whole input at once (rows back to back) gives the same bytes.
    std::vector<std::uint8_t> all(g.quantized.size());
    gg::quantize(t, x.data(), static_cast<Index>(x.size()), all.data());
    CHECK(all == g.quantized);

    // Random block bytes: scales and quants ggml's quantizers never produce.
    const auto bs = static_cast<std::size_t>(gg::traits(t).block_size);
    const auto rb = ember_test::ggml_random_block_bytes(
        g.random_blocks, static_cast<std::size_t>(gg::traits(t).block_bytes), half_fields(t));
    std::vector<float> yr(g.random_blocks * bs);
    gg::decode_row(t, rb.data(), static_cast<Index>(yr.size()), yr.data());
    CHECK(ember_test::ggml_fnv1a(yr.data(), yr.size()) == g.random_hash);
  }
}

TEST_CASE("ggml: fp16 and bf16 conversions agree with Eigen's on every half and on random floats",
          "[ggml]") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float ours = gg::fp16_to_fp32(bits);
    const float eigen = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
    if (std::isnan(eigen)) {
      CHECK(std::isnan(ours));
    } else if (std::bit_cast<std::uint32_t>(ours) != std::bit_cast<std::uint32_t>(eigen)) {
      FAIL_CHECK("half " << h << ": " << ours << " != " << eigen);
    }
    const float b = gg::bf16_to_fp32(bits);
    CHECK(std::bit_cast<std::uint32_t>(b) == static_cast<std::uint32_t>(h) << 16);
  }
  ember::Random rng(99);
  for (int i = 0; i < 200000; ++i) {
    const auto u = static_cast<std::uint32_t>(rng.next_u64() >> 32);
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f)) {
      CHECK((gg::fp32_to_fp16(f) & 0x7FFFu) == 0x7E00u);
      CHECK(((gg::fp32_to_bf16(f) & 0x7F80u) == 0x7F80u && (gg::fp32_to_bf16(f) & 0x7Fu) != 0));
      continue;
    }
    const auto h = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(f));
    const auto b = Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(f));
    if (gg::fp32_to_fp16(f) != h) FAIL_CHECK("fp16 of " << f << " (bits " << u << ")");
    if (gg::fp32_to_bf16(f) != b) FAIL_CHECK("bf16 of " << f << " (bits " << u << ")");
  }
  // NaN payloads: bf16 keeps the top bits and sets the quiet bit, fp16 gives 0x7E00 with the sign.
  CHECK(gg::fp32_to_bf16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);
  CHECK(gg::fp32_to_bf16(std::bit_cast<float>(0xffa5a5a5u)) == 0xffe5);
  CHECK(gg::fp32_to_fp16(std::bit_cast<float>(0xffa5a5a5u)) == 0xFE00);
}

TEST_CASE("ggml: nearest_int rounds half to even and truncate_to_int is defined everywhere",
          "[ggml]") {
  CHECK(gg::nearest_int(0.5f) == 0);
  CHECK(gg::nearest_int(1.5f) == 2);
  CHECK(gg::nearest_int(-2.5f) == -2);
  CHECK(gg::nearest_int(-2.51f) == -3);
  CHECK(gg::nearest_int(4194303.f) == 4194303);
  CHECK(gg::truncate_to_int(-1.9f) == -1);
  CHECK(gg::truncate_to_int(std::nanf("")) == INT32_MIN);
  CHECK(gg::truncate_to_int(3e9f) == INT32_MIN);
  CHECK(gg::to_int8(300.f) == static_cast<std::int8_t>(300 & 0xFF));
}

TEST_CASE("ggml: dot_row fuses decoding with the documented summation order", "[ggml]") {
  ember::Random rng(5);
  for (const Type t : gg::codec_types) {
    for (const Index d : {Index{256}, Index{512}, Index{1024}}) {
      INFO(gg::traits(t).name << " d = " << d);
      std::vector<float> row(static_cast<std::size_t>(d));
      std::vector<float> x(static_cast<std::size_t>(d));
      for (auto& v : row) v = static_cast<float>(rng.normal());
      for (auto& v : x) v = static_cast<float>(rng.normal());
      std::vector<std::uint8_t> q(static_cast<std::size_t>(gg::row_bytes(t, d)));
      gg::quantize(t, row.data(), d, q.data());
      std::vector<float> dec(static_cast<std::size_t>(d));
      gg::decode_row(t, q.data(), d, dec.data());
      // The documented order, spelled out.
      float lanes[8] = {};
      for (Index c = 0; c < d; ++c) {
        const float p = dec[static_cast<std::size_t>(c)] * x[static_cast<std::size_t>(c)];
        lanes[c % 8] += p;
      }
      const float want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      const float got = gg::dot_row(t, q.data(), x.data(), d);
      CHECK(std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want));
      double exact = 0;
      for (Index c = 0; c < d; ++c)
        exact += double{dec[static_cast<std::size_t>(c)]} * double{x[static_cast<std::size_t>(c)]};
      CHECK(got == Approx(exact).margin(1e-3));
    }
  }
  // The plain types accept any width; the lanes continue across the last partial chunk.
  for (const Type t : {Type::F32, Type::F16, Type::BF16}) {
    for (const Index d : {Index{1}, Index{7}, Index{13}, Index{300}}) {
      INFO(gg::traits(t).name << " d = " << d);
      std::vector<float> row(static_cast<std::size_t>(d));
      std::vector<float> x(static_cast<std::size_t>(d));
      for (auto& v : row) v = static_cast<float>(rng.normal());
      for (auto& v : x) v = static_cast<float>(rng.normal());
      std::vector<std::uint8_t> q(static_cast<std::size_t>(gg::row_bytes(t, d)));
      gg::quantize(t, row.data(), d, q.data());
      std::vector<float> dec(static_cast<std::size_t>(d));
      gg::decode_row(t, q.data(), d, dec.data());
      float lanes[8] = {};
      for (Index c = 0; c < d; ++c) {
        const float p = dec[static_cast<std::size_t>(c)] * x[static_cast<std::size_t>(c)];
        lanes[c % 8] += p;
      }
      const float want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      CHECK(std::bit_cast<std::uint32_t>(gg::dot_row(t, q.data(), x.data(), d)) ==
            std::bit_cast<std::uint32_t>(want));
    }
  }
}

TEST_CASE("ggml: round trips of N(0, 1) data stay within each type's error bound", "[ggml]") {
  // Bounds a little above the maxima measured on 64 x 4096 N(0, 1) values (docs/gguf.md lists
  // them; examples/ggml_errors.cpp prints them).
  struct Bound {
    Type t;
    double max_abs;
  };
  const Bound bounds[] = {
      {Type::F32, 0.0},   {Type::F16, 0.002}, {Type::BF16, 0.02}, {Type::Q8_0, 0.02},
      {Type::Q6_K, 0.08}, {Type::Q5_1, 0.13}, {Type::Q5_0, 0.2},  {Type::Q5_K, 0.18},
      {Type::Q4_1, 0.27}, {Type::Q4_0, 0.4},  {Type::Q4_K, 0.32}, {Type::Q3_K, 0.7},
      {Type::Q2_K, 1.5},
  };
  ember::Random rng(11);
  const Index d = 4096;
  std::vector<float> x(static_cast<std::size_t>(d) * 16);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  for (const Bound& b : bounds) {
    INFO(gg::traits(b.t).name);
    const Index n = static_cast<Index>(x.size());
    std::vector<std::uint8_t> q(static_cast<std::size_t>(gg::row_bytes(b.t, n)));
    gg::quantize(b.t, x.data(), n, q.data());
    std::vector<float> y(x.size());
    gg::decode_row(b.t, q.data(), n, y.data());
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::fabs(double{y[i]} - double{x[i]}));
    CHECK(worst <= b.max_abs);
  }
}

TEST_CASE("ggml: the kernels' preconditions are checked by EMBER_ASSERT in test builds", "[ggml]") {
  std::vector<std::uint8_t> q(1024);
  std::vector<float> y(1024);
  // A width that is not a whole number of blocks.
  CHECK_THROWS_AS(gg::decode_row(Type::Q4_K, q.data(), 96, y.data()), std::logic_error);
  CHECK_THROWS_AS(gg::quantize(Type::Q4_0, y.data(), 33, q.data()), std::logic_error);
  CHECK_THROWS_AS(gg::dot_row(Type::Q8_0, q.data(), y.data(), 40), std::logic_error);
  // A type ember does not decode.
  CHECK_THROWS_AS(gg::decode_row(GgmlType::IQ2_XXS, q.data(), 256, y.data()), std::logic_error);
  CHECK_THROWS_AS(gg::quantize(GgmlType::Q8_K, y.data(), 256, q.data()), std::logic_error);
}

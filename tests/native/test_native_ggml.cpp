// ggml row kernels built with -march=native (binary ember_native_tests): the AVX2 block decoders
// and dot products of ember/ggml/rows.hpp exist only when the target has AVX2, which the portable
// ember_tests build does not assume. Checked here against ggml's reference decoders as the
// benchmarks run them: decoded values bit for bit (any block bytes, streaming stores or not), dot
// products within float rounding.
// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/ggml/decode.hpp"
#include "ember/ggml/encode.hpp"
#include "ember/ggml/rows.hpp"
#include "ember/random.hpp"

namespace gg = ember::detail::ggml;
using ember::Index;

namespace {

/// `n` random bytes from Random(seed): block scales and codes ggml's quantizers never produce,
/// NaN and infinite fp16 scales included.
std::vector<std::uint8_t> native_random_bytes(std::size_t n, std::uint64_t seed) {
  ember::Random rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng.next_u64() >> 56);
  return b;
}

/// The same bits, or both NaN (a NaN's payload depends on the operand order the compiler picks).
bool native_same_bits(const float* a, const float* b, Index n) {
  for (Index i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("the ggml row decoders built for this machine give the reference decoders' bits",
          "[ggml][kernels][native]") {
  for (const ember::GgmlType t : gg::codec_types) {
    const Index block = gg::traits(t).block_size;
    for (const Index blocks : {Index{1}, Index{3}, Index{16}}) {
      // Plain types: widths off the 32-value vector step too.
      for (const Index extra : {Index{0}, Index{block == 1 ? 7 : 0}}) {
        const Index d = blocks * (block == 1 ? 32 : block) + extra;
        INFO(gg::traits(t).name << " d = " << d);
        const auto bytes =
            native_random_bytes(static_cast<std::size_t>(gg::row_bytes(t, d)),
                                static_cast<std::uint64_t>(d) * 31 + static_cast<std::uint64_t>(t));
        std::vector<float> ref(static_cast<std::size_t>(d));
        gg::decode_row(t, bytes.data(), d, ref.data());
        for (const float s : {1.0f, 1.7f, -64.0f}) {
          std::vector<float> want(ref.size());
          for (std::size_t c = 0; c < ref.size(); ++c) want[c] = ref[c] * s;
          std::vector<float> got(ref.size() + 8);
          gg::decode_row_scaled<false>(t, bytes.data(), d, s, got.data() + 1);  // unaligned
          CHECK(native_same_bits(got.data() + 1, want.data(), d));
          alignas(32) static float streamed[16 * 256 + 7];
          gg::decode_row_scaled<true>(t, bytes.data(), d, s, streamed);
          CHECK(native_same_bits(streamed, want.data(), d));
        }
      }
    }
  }
}

TEST_CASE("the ggml dot products built for this machine are within float rounding of exact",
          "[ggml][kernels][native]") {
  ember::Random rng(77);
  for (const ember::GgmlType t : gg::codec_types) {
    const Index d =
        t == ember::GgmlType::F32 || t == ember::GgmlType::F16 || t == ember::GgmlType::BF16 ? 519
                                                                                             : 512;
    const Index rows = 5;
    const Index rb = gg::row_bytes(t, d);
    std::vector<float> x(static_cast<std::size_t>(rows * d));
    for (auto& v : x) v = static_cast<float>(rng.normal());
    std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * rb));
    std::vector<float> w(x.size());
    for (Index r = 0; r < rows; ++r) {
      gg::quantize(t, x.data() + r * d, d, q.data() + r * rb);
      gg::decode_row(t, q.data() + r * rb, d, w.data() + r * d);
    }
    for (const Index n : {Index{1}, Index{2}, Index{3}, Index{4}, Index{7}}) {
      INFO(gg::traits(t).name << " n = " << n);
      std::vector<float> h(static_cast<std::size_t>(n * d));
      for (auto& v : h) v = static_cast<float>(rng.normal());
      std::vector<float> out(static_cast<std::size_t>(n * rows), -1.0f);
      gg::dot_rows(t, q.data(), rb, rows, d, h.data(), d, n, out.data(), rows);
      for (Index j = 0; j < n; ++j) {
        for (Index r = 0; r < rows; ++r) {
          double exact = 0;
          double magnitude = 0;
          for (Index c = 0; c < d; ++c) {
            const double p = double{w[static_cast<std::size_t>(r * d + c)]} *
                             double{h[static_cast<std::size_t>(j * d + c)]};
            exact += p;
            magnitude += std::fabs(p);
          }
          const double got = out[static_cast<std::size_t>(j * rows + r)];
          CHECK(std::fabs(got - exact) <= static_cast<double>(d) * 0x1p-23 * magnitude);
        }
      }
    }
  }
}

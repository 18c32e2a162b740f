// ggml row kernels built with -march=native (binary ember_native_tests): the AVX2 lookup and exact
// dot products of ember/ggml/lookup.hpp and exact_dot.hpp exist only when the target has AVX2,
// which the portable ember_tests build does not assume. Checked here against ggml's reference
// decoders as the benchmarks run them: decoded values bit for bit (any block bytes, streaming
// stores or not), dot products within float rounding. SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/ggml/decode.hpp"
#include "ember/ggml/encode.hpp"
#include "ember/ggml/exact_dot.hpp"
#include "ember/ggml/lookup.hpp"
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

#if EMBER_DETAIL_GGML_AVX2
namespace {

/// dot_whole_rows of `t` over `rows` rows of d, for the first N hidden rows of h, asking for the
/// next row's slices ahead (AskAhead) or not.
template <bool AskAhead, std::size_t N>
std::vector<float> whole_rows(ember::GgmlType t, const std::vector<std::uint8_t>& q, Index rows,
                              Index d, const std::vector<float>& h) {
  std::vector<float> out(N * static_cast<std::size_t>(rows), -1.0f);
  gg::avx2::visit_unit(t, [&](auto unit) {
    using Unit = typename decltype(unit)::type;
    gg::avx2::dot_whole_rows<Unit, gg::exact_isa::Dots<N>>(q.data(), gg::row_bytes(t, d), rows, d,
                                                           h.data(), d, AskAhead, out.data(), rows);
  });
  return out;
}

}  // namespace

TEST_CASE("the whole-row dot kernel gives the same bits asking for the rows ahead or not",
          "[ggml][kernels][native]") {
  ember::Random rng(78);
  for (const ember::GgmlType t : gg::codec_types) {
    const bool plain = gg::traits(t).block_size == 1;
    // One slice and a short last one (plain types), several slices of whole blocks.
    for (const Index d : {plain ? Index{300} : Index{256}, Index{1280}}) {
      INFO(gg::traits(t).name << " d = " << d);
      const Index rows = 7;
      const Index rb = gg::row_bytes(t, d);
      std::vector<float> x(static_cast<std::size_t>(rows * d));
      for (auto& v : x) v = static_cast<float>(rng.normal());
      std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * rb));
      for (Index r = 0; r < rows; ++r) gg::quantize(t, x.data() + r * d, d, q.data() + r * rb);
      std::vector<float> h(static_cast<std::size_t>(2 * d));
      for (auto& v : h) v = static_cast<float>(rng.normal());
      const auto one_ahead = whole_rows<true, 1>(t, q, rows, d, h);
      const auto one_whole = whole_rows<false, 1>(t, q, rows, d, h);
      CHECK(std::memcmp(one_ahead.data(), one_whole.data(), one_ahead.size() * 4) == 0);
      const auto two_ahead = whole_rows<true, 2>(t, q, rows, d, h);
      const auto two_whole = whole_rows<false, 2>(t, q, rows, d, h);
      CHECK(std::memcmp(two_ahead.data(), two_whole.data(), two_ahead.size() * 4) == 0);
      // Hidden row 0 takes the same order in a pass of 1 and of 2; every logit was written.
      CHECK(std::memcmp(one_ahead.data(), two_ahead.data(), one_ahead.size() * 4) == 0);
      for (const float z : two_ahead) CHECK((std::isfinite(z) && z != -1.0f));
    }
  }
}
#endif

#if EMBER_DETAIL_GGML_AVX512
namespace {

/// A sink that is not a Dots, so that feed takes the K-quants' generic path (a Codes32 per 32
/// columns) into the Dots it forwards to.
template <std::size_t N>
struct ThroughCodes32 {
  gg::avx512::Dots<N>& dots;
  template <bool Offset, bool Same, bool Signed>
  void codes(Index c, const gg::avx2::Codes32<Offset, Same, Signed>& g) {
    dots.codes(c, g);
  }
};

/// Each logit of `rows` super-block rows of B fed to a Dots<N> by the super-block path (or, with
/// Generic, a Codes32 at a time), and the row's offset coefficients after it.
template <class B, std::size_t N, bool Generic>
std::vector<float> super_block_dots(const std::vector<std::uint8_t>& q, Index rows, Index d,
                                    const std::vector<float>& h) {
  const Index groups = d / 16;
  const std::vector<float> hsum = gg::avx2::hidden_group_sums(h.data(), d, N, groups);
  std::vector<float> coef(static_cast<std::size_t>(groups));
  std::vector<float> out;
  for (Index r = 0; r < rows; ++r) {
    gg::avx512::Dots<N> dots{h.data(), d, hsum.data(), groups, coef.data()};
    const std::uint8_t* row = q.data() + r * (d / 256) * Index{sizeof(B)};
    for (Index s = 0; s < d / 256; ++s) {
      const std::uint8_t* b = row + s * Index{sizeof(B)};
      if constexpr (Generic) {
        ThroughCodes32<N> sink{dots};
        gg::avx2::feed(std::type_identity<B>{}, b, 256 * s, sink);
      } else {
        gg::avx512::Vec512::super_block<B>(dots, b, 256 * s);
      }
    }
    float results[N];
    dots.results(true, results, 1);
    out.insert(out.end(), results, results + N);
    out.insert(out.end(), coef.begin(), coef.end());
  }
  return out;
}

template <class B, std::size_t N>
void check_super_block_path(const std::vector<std::uint8_t>& q, Index rows, Index d,
                            const std::vector<float>& h) {
  INFO("N = " << N);
  const auto fast = super_block_dots<B, N, false>(q, rows, d, h);
  const auto generic = super_block_dots<B, N, true>(q, rows, d, h);
  REQUIRE(fast.size() == generic.size());
  CHECK(native_same_bits(fast.data(), generic.data(), static_cast<Index>(fast.size())));
}

/// dot_rows over `rows` rows of B against the generic path (a Codes32 per 32 columns, a row at a
/// time): the whole-row loop at N <= 2 and the tiles above, the same bits.
template <class B, std::size_t N>
void check_super_rows(ember::GgmlType t, const std::vector<std::uint8_t>& q, Index rows, Index d,
                      const std::vector<float>& h) {
  INFO("dot_rows, N = " << N);
  std::vector<float> out(N * static_cast<std::size_t>(rows));
  gg::dot_rows(t, q.data(), gg::row_bytes(t, d), rows, d, h.data(), d, static_cast<Index>(N),
               out.data(), rows);
  const auto generic = super_block_dots<B, N, true>(q, rows, d, h);
  const std::size_t per_row = N + static_cast<std::size_t>(d / 16);  // results, then coefficients
  std::vector<float> expected(out.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
    for (std::size_t j = 0; j < N; ++j)
      expected[j * static_cast<std::size_t>(rows) + r] = generic[r * per_row + j];
  CHECK(native_same_bits(out.data(), expected.data(), static_cast<Index>(out.size())));
}

}  // namespace

TEST_CASE("the K-quants' super-block dot path gives the bits of a Codes32 per 32 columns",
          "[ggml][kernels][native]") {
  ember::Random rng(79);
  for (const ember::GgmlType t : gg::codec_types) {
    gg::visit_block(t, [&](auto block) {
      using B = typename decltype(block)::type;
      if constexpr (gg::avx512::is_k_super<B>) {
        for (const Index d : {Index{256}, Index{1280}}) {
          INFO(gg::traits(t).name << " d = " << d);
          const Index rows = 5;
          // Quantized rows, and random bytes (scales and codes no quantizer writes, NaN and
          // infinite fp16 scales included).
          std::vector<float> x(static_cast<std::size_t>(rows * d));
          for (auto& v : x) v = static_cast<float>(rng.normal());
          const Index rb = gg::row_bytes(t, d);
          std::vector<std::uint8_t> quantized(static_cast<std::size_t>(rows * rb));
          for (Index r = 0; r < rows; ++r) {
            gg::quantize(t, x.data() + r * d, d, quantized.data() + r * rb);
          }
          auto random = native_random_bytes(quantized.size(), 80);
          std::vector<float> h(static_cast<std::size_t>(8 * d));
          for (auto& v : h) v = static_cast<float>(rng.normal());
          for (const std::vector<std::uint8_t>* q : {&quantized, &random}) {
            check_super_block_path<B, 1>(*q, rows, d, h);
            check_super_block_path<B, 2>(*q, rows, d, h);
            check_super_block_path<B, 3>(*q, rows, d, h);
            check_super_block_path<B, 5>(*q, rows, d, h);
            check_super_block_path<B, 8>(*q, rows, d, h);
            check_super_rows<B, 1>(t, *q, rows, d, h);
            check_super_rows<B, 2>(t, *q, rows, d, h);
            check_super_rows<B, 3>(t, *q, rows, d, h);
            check_super_rows<B, 8>(t, *q, rows, d, h);
          }
        }
      }
    });
  }
}
#endif

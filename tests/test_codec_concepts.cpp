// Tests of ember/codec/concepts.hpp: every codec of ember meets the contract it claims, a type
// missing part of it does not, and the "adding a codec" sketch of docs/tables.md (compiled here
// from the page itself) is a codec whose tables work like any other.
// SPDX-License-Identifier: MIT
#include "ember/codec/concepts.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/codec/ggml.hpp"
#include "ember/codec/int8_rowwise.hpp"
#include "ember/codec/plain.hpp"
#include "ember/codec/reduced.hpp"
#include "ember/embedding.hpp"
#include "ember/embedding_view.hpp"
#include "ember/table.hpp"
// The code blocks of docs/tables.md's "Adding a codec", extracted at configure time
// (tests/CMakeLists.txt).
#include "doc_codec_sketch.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
namespace codec = ember::codec;

namespace {

// The sketch of docs/tables.md before the contract was written down: no view_family.
struct NoViewFamily {
  using Unit = float;
  using Value = float;
  static constexpr bool element_rows = true;
  static constexpr bool is_plain = true;
  static constexpr const char* family = "NoViewFamily";
  [[nodiscard]] static constexpr const char* name() noexcept { return "f32"; }
  [[nodiscard]] static constexpr Index units_per_row(Index d) noexcept { return d; }
  [[nodiscard]] static constexpr bool holds_width(Index /*d*/) noexcept { return true; }
  static void decode_row(const float* row, Index d, float s, float* dst) noexcept {
    for (Index c = 0; c < d; ++c) dst[c] = row[c] * s;
  }
};

// A plain codec whose units are not its values: is_plain promises rows are Value[d] as stored.
struct PlainButDouble {
  using Unit = double;
  using Value = float;
  static constexpr bool element_rows = true;
  static constexpr bool is_plain = true;
  static constexpr const char* family = "PlainButDouble";
  static constexpr const char* view_family = "PlainButDoubleView";
  [[nodiscard]] static constexpr const char* name() noexcept { return "f64"; }
  [[nodiscard]] static constexpr Index units_per_row(Index d) noexcept { return d; }
  [[nodiscard]] static constexpr bool holds_width(Index /*d*/) noexcept { return true; }
  static void decode_row(const double* row, Index d, float s, float* dst) noexcept {
    for (Index c = 0; c < d; ++c) dst[c] = static_cast<float>(row[c]) * s;
  }
};

}  // namespace

TEST_CASE("ember's codecs meet the contract they claim", "[codec]") {
  STATIC_REQUIRE_FALSE(codec::EncodingCodec<codec::Plain<float>>);  // nothing to encode
  STATIC_REQUIRE(codec::OwnedCodec<codec::Plain<float>>);
  STATIC_REQUIRE(codec::OwnedCodec<codec::Plain<double>>);
  STATIC_REQUIRE(codec::EncodingCodec<codec::Reduced<Eigen::half>>);
  STATIC_REQUIRE(codec::EncodingCodec<codec::Reduced<Eigen::bfloat16>>);
  STATIC_REQUIRE(codec::EncodingCodec<codec::Int8Rowwise>);
  // ggml's codec carries its block type at run time: views only, with both optional members
  // (streaming decode only where it streams: builds with AVX2 and F16C).
  STATIC_REQUIRE(codec::RowCodec<codec::Ggml>);
  STATIC_REQUIRE_FALSE(codec::OwnedCodec<codec::Ggml>);
#if defined(__AVX2__) && defined(__F16C__)
  STATIC_REQUIRE(codec::StreamingDecode<codec::Ggml>);
#else
  STATIC_REQUIRE_FALSE(codec::StreamingDecode<codec::Ggml>);
#endif
  STATIC_REQUIRE(codec::StreamingDot<codec::Ggml>);
  STATIC_REQUIRE_FALSE(codec::StreamingDot<codec::Int8Rowwise>);
  STATIC_REQUIRE_FALSE(codec::StreamingDecode<codec::Reduced<Eigen::half>>);
  // LogitsMode::quantized_hidden: every codec with a dot type of its own; plain rows are exact.
  STATIC_REQUIRE(codec::QuantizedDot<codec::Ggml>);
  STATIC_REQUIRE(codec::QuantizedDot<codec::Int8Rowwise>);
  STATIC_REQUIRE(codec::QuantizedDot<codec::Reduced<Eigen::half>>);
  STATIC_REQUIRE(codec::QuantizedDot<codec::Reduced<Eigen::bfloat16>>);
  STATIC_REQUIRE_FALSE(codec::QuantizedDot<codec::Plain<float>>);
  STATIC_REQUIRE_FALSE(codec::QuantizedDot<codec::Plain<double>>);
  // What the tied logits make of each codec: derived from the hooks above.
  using codec::LogitsKind;
  STATIC_REQUIRE(codec::logits_kind_v<codec::Plain<float>> == LogitsKind::plain);
  STATIC_REQUIRE(codec::logits_kind_v<codec::Plain<double>> == LogitsKind::plain);
  STATIC_REQUIRE(codec::logits_kind_v<codec::Reduced<Eigen::half>> == LogitsKind::quantized_dot);
  STATIC_REQUIRE(codec::logits_kind_v<codec::Reduced<Eigen::bfloat16>> ==
                 LogitsKind::quantized_dot);
  STATIC_REQUIRE(codec::logits_kind_v<codec::Int8Rowwise> == LogitsKind::quantized_dot);
  STATIC_REQUIRE(codec::logits_kind_v<codec::Ggml> == LogitsKind::streaming_and_quantized_dot);
}

TEST_CASE("a type that misses part of the contract is not a codec", "[codec]") {
  STATIC_REQUIRE_FALSE(codec::RowCodec<NoViewFamily>);
  STATIC_REQUIRE_FALSE(codec::RowCodec<PlainButDouble>);
  STATIC_REQUIRE_FALSE(codec::RowCodec<float>);
  STATIC_REQUIRE_FALSE(codec::RowCodec<ember::Embedding<float>>);
}

TEST_CASE("the codec sketch of docs/tables.md is a codec whose tables work like any other",
          "[codec]") {
  STATIC_REQUIRE(codec::EncodingCodec<codec::MyFormat>);
  STATIC_REQUIRE_FALSE(codec::StreamingDot<codec::MyFormat>);
  STATIC_REQUIRE(codec::logits_kind_v<codec::MyFormat> == codec::LogitsKind::decoded);
  const RowMatrix<float> w = ember_test::random_table<float>(40, 12, 3);
  const ember::MyEmbedding mine = ember::MyEmbedding::from_float(w);
  CHECK(mine.vocab_size() == 40);
  CHECK(mine.d_model() == 12);
  CHECK(mine.row_bytes() == 12 * 2);
  CHECK(std::string(mine.codec_name()) == "my_format");
  // Steps of 1/256: every value within half a step.
  CHECK(mine.max_row_error(w).maxCoeff() <= 0.5 / 256.0);
  // Lookups, logits and the backward are those of a float table holding the decoded rows.
  const RowMatrix<float> decoded = mine.dequantize();
  const ember::EmbeddingView<float> plain(decoded, {}, ember::LookupScale::constant(mine.scale()));
  const std::vector<int> ids{3, 1, 39, 3};
  CHECK(ember_test::same_bits(mine.forward(ids), plain.forward(ids)));
  const RowMatrix<float> h = ember_test::random_table<float>(2, 12, 5);
  CHECK(ember_test::same_bits(mine.logits(h), plain.logits(h)));
  // A view over the encoded rows of the owning table reads the same rows.
  const ember::MyEmbeddingView view(mine);
  CHECK(ember_test::same_bits(view.forward(ids), mine.forward(ids)));
}

// Tests of ember/table.hpp: every codec with every holder runs the same lookup, fused positions,
// backward and tied logits; the lookup scale is fixed at construction; views of every codec over
// memory they do not own.
// SPDX-License-Identifier: MIT
#include "ember/table.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/embedding_view.hpp"
#include "ember/errors.hpp"
#include "ember/input_embedding.hpp"
#include "ember/positional.hpp"
#include "ember/quantized.hpp"
#include "ember/reduced.hpp"
#include "ember/reduced_view.hpp"
#include "ember/sparse_grad.hpp"
#include "support/embedding_reference.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

namespace {

// The float rows a table stands for (decoded at scale 1), for the references below.
template <class Tab>
RowMatrix<typename Tab::Value> decoded_rows(const Tab& table) {
  return table.dequantize();
}

// Checks one table against a plain float/double table holding its decoded rows: lookup, lookup
// into a block, fused positions, backward and tied logits give the same bits.
template <class Tab>
void check_against_decoded(const Tab& table) {
  using V = typename Tab::Value;
  const RowMatrix<V> w = decoded_rows(table);
  const ember::EmbeddingView<V> plain(w, {}, ember::LookupScale::constant(table.scale()));
  REQUIRE(plain.scale() == table.scale());
  const auto ids = ember_test::random_ids(24, table.vocab_size(), 3);

  const RowMatrix<V> x = table.forward(ids);
  RowMatrix<V> expected(24, table.d_model());
  for (Index i = 0; i < 24; ++i) {
    table.codec().decode_row(ember::detail::rows_of(table).row(ids[static_cast<std::size_t>(i)]),
                             table.d_model(), table.scale(), expected.row(i).data());
  }
  CHECK(ember_test::same_bits(x, expected));

  RowMatrix<V> big = RowMatrix<V>::Constant(26, table.d_model() + 3, V(-7));
  table.forward(ids, big.block(1, 2, 24, table.d_model()));
  CHECK(ember_test::same_bits(big.block(1, 2, 24, table.d_model()), x));
  CHECK((big.row(0).array() == V(-7)).all());

  const RowMatrix<V> pe = ember_test::random_table<V>(8, table.d_model(), 5);
  RowMatrix<V> fused(24, table.d_model());
  ember::embed_with_positions(table, pe, ids, fused, 6, 2);
  RowMatrix<V> unfused = x;
  for (Index i = 0; i < 24; ++i) unfused.row(i) += pe.row(2 + i % 6);
  CHECK(ember_test::same_bits(fused, unfused));

  const RowMatrix<V> g = ember_test::random_table<V>(24, table.d_model(), 6);
  ember::SparseRowGrad<V> grad;
  ember::SparseRowGrad<V> grad_plain;
  table.backward(ids, g, grad);
  plain.backward(ids, g, grad_plain);
  CHECK(grad == grad_plain);

  const RowMatrix<V> h = ember_test::random_table<V>(3, table.d_model(), 7);
  CHECK(ember_test::same_bits(table.logits(h), plain.logits(h)));
}

// A block format in miniature: rows of whole blocks of 4 floats, stored as they are.
struct Blocks4 {
  using Unit = float;
  using Value = float;
  static constexpr bool element_rows = false;
  static constexpr bool is_plain = false;
  static constexpr const char* family = "Blocks4Embedding";
  static constexpr const char* view_family = "Blocks4EmbeddingView";
  [[nodiscard]] static constexpr const char* name() noexcept { return "blocks4"; }
  [[nodiscard]] static constexpr Index units_per_row(Index d) noexcept { return d; }
  [[nodiscard]] static constexpr bool holds_width(Index d) noexcept { return d % 4 == 0; }
  static void decode_row(const float* row, Index d, float s, float* dst) noexcept {
    for (Index c = 0; c < d; ++c) dst[c] = row[c] * s;
  }
};

}  // namespace

TEST_CASE("every codec and holder gives the bits of a plain table holding its decoded rows",
          "[table]") {
  const RowMatrix<float> w = ember_test::random_table<float>(40, 24, 11);
  const ember::Embedding<float> emb(w);
  check_against_decoded(emb);
  check_against_decoded(ember::EmbeddingView<float>(emb));
  const ember::Embedding<double> emb64(w.cast<double>());
  check_against_decoded(emb64);

  const auto half = ember::HalfEmbedding::from_float(w);
  check_against_decoded(half);
  check_against_decoded(ember::HalfEmbeddingView(half));
  const auto bf16 = ember::BFloat16Embedding::from_float(w);
  check_against_decoded(bf16);
  check_against_decoded(ember::BFloat16EmbeddingView(bf16));

  const ember::QuantizedEmbedding int8(w);
  check_against_decoded(int8);
  check_against_decoded(ember::QuantizedEmbeddingView(int8));
}

TEST_CASE("an int8 view reads FBGEMM rows in caller memory, with a row stride and a keep-alive",
          "[table][quantized]") {
  const RowMatrix<float> w = ember_test::random_table<float>(10, 7, 13);
  const ember::QuantizedEmbedding owner(w);
  const Index row_bytes = owner.row_bytes();
  REQUIRE(row_bytes == 7 + 8);
  // The same rows 20 bytes apart, as a file might lay them out, owned by a shared buffer.
  auto buffer = std::make_shared<std::vector<std::uint8_t>>(10 * 20, std::uint8_t{0xAB});
  for (Index r = 0; r < 10; ++r) {
    std::memcpy(buffer->data() + r * 20, owner.bytes().data() + r * row_bytes,
                static_cast<std::size_t>(row_bytes));
  }
  const ember::QuantizedEmbeddingView view(buffer->data(), 10, 7, 20, buffer);
  const std::weak_ptr<std::vector<std::uint8_t>> watch = buffer;
  buffer.reset();
  CHECK_FALSE(watch.expired());  // the view keeps its memory alive
  CHECK(view.row_stride() == 20);
  CHECK(view.row_bytes() == row_bytes);
  CHECK(std::string(view.codec_name()) == "int8_rowwise");
  const auto ids = ember_test::random_ids(30, 10, 4);
  CHECK(ember_test::same_bits(view.forward(ids), owner.forward(ids)));
  CHECK(ember_test::same_bits(view.dequantize(), owner.dequantize()));
  for (Index r = 0; r < 10; ++r) {
    CHECK(view.row_scale(r) == owner.row_scale(r));
    CHECK(view.row_bias(r) == owner.row_bias(r));
    CHECK(std::memcmp(view.codes(r).data(), owner.codes(r).data(), 7) == 0);
  }
  CHECK_THROWS_AS(view.codes(10), ember::IndexError);

  // a stride shorter than a row, a null pointer and bad sizes are refused at construction
  const auto short_stride = ember_test::catch_as<ember::ShapeError>(
      [&] { (void)ember::QuantizedEmbeddingView(owner.bytes().data(), 10, 7, 14); });
  REQUIRE(short_stride);
  CHECK(std::string(short_stride->what()) ==
        "QuantizedEmbeddingView: row_stride 14 is smaller than the bytes of a row = 15");
  CHECK_THROWS_AS(ember::QuantizedEmbeddingView(nullptr, 10, 7), ember::ValueError);
  CHECK_THROWS_AS(ember::QuantizedEmbeddingView(owner.bytes().data(), 0, 7), ember::ShapeError);
  const auto bad_id = ember_test::catch_as<ember::IndexError>([&] {
    (void)view.forward(std::vector<int>{1, 10});
  });
  REQUIRE(bad_id);
  CHECK(std::string(bad_id->what()) ==
        "QuantizedEmbeddingView::forward: id 10 at position 1 is outside [0, 10)");
}

TEST_CASE("the lookup scale is fixed at construction: sqrt(d_model), none, or a constant",
          "[table]") {
  const RowMatrix<float> w = ember_test::random_table<float>(6, 16, 17);
  const std::vector<TokenId> ids{5, 0, 5};
  const ember::Embedding<float> by_default(w);
  const ember::Embedding<float> unscaled(w, ember::LookupScale::none());
  // Gemma multiplies by sqrt(d_model) rounded to bfloat16.
  const auto gemma_scale = static_cast<double>(Eigen::bfloat16(std::sqrt(16.0f)));
  const ember::Embedding<float> gemma(w, ember::LookupScale::constant(gemma_scale));
  CHECK(by_default.scale() == 4.0f);
  CHECK(unscaled.scale() == 1.0f);
  CHECK(gemma.scale() == static_cast<float>(gemma_scale));
  CHECK(
      ember_test::same_bits(unscaled.forward(ids), ember_test::lookup_loops<float>(w, ids, 1.0f)));

  const auto half = ember::HalfEmbedding::from_float(w, false, ember::LookupScale::constant(0.5));
  CHECK(half.scale() == 0.5f);
  CHECK(ember::HalfEmbeddingView(half).scale() == 0.5f);  // a view of an owner takes its scale
  const ember::QuantizedEmbedding q(w, false, ember::LookupScale::none());
  CHECK(q.scale() == 1.0f);
  CHECK(ember_test::same_bits(q.forward(ids).row(0), q.dequantize_row(5)));

  // the scale reaches backward, never the tied logits
  ember::SparseRowGrad<float> g1, g4;
  const RowMatrix<float> ones = RowMatrix<float>::Ones(3, 16);
  unscaled.backward(ids, ones, g1);
  by_default.backward(ids, ones, g4);
  CHECK(ember_test::same_bits(g4.values(), (g1.values() * 4.0f).eval()));
  const RowMatrix<float> h = ember_test::random_table<float>(2, 16, 18);
  CHECK(ember_test::same_bits(unscaled.logits(h), by_default.logits(h)));

  CHECK_THROWS_AS(ember::LookupScale::constant(std::nan("")), ember::ValueError);
  CHECK_THROWS_AS(ember::LookupScale::constant(INFINITY), ember::ValueError);
}

TEST_CASE("weight() of an owning table changes values, never the shape", "[table]") {
  ember::HalfEmbedding half(5, 4, 1);
  STATIC_REQUIRE(std::is_same_v<decltype(half.weight()), Eigen::Map<RowMatrix<Eigen::half>>>);
  STATIC_REQUIRE(
      std::is_same_v<decltype(std::as_const(half).weight()), const RowMatrix<Eigen::half>&>);
  half.weight().row(2).setConstant(Eigen::half(0.5f));
  CHECK(half.dequantize_row(2).isConstant(0.5f));
  const ember::HalfEmbeddingView view(half);
  STATIC_REQUIRE(std::is_same_v<decltype(view.weight()), ember::HalfEmbeddingView::Map>);
}

TEST_CASE("every table kind reports its codec and its storage", "[table]") {
  const RowMatrix<float> w = ember_test::random_table<float>(3, 8, 19);
  CHECK(std::string(ember::Embedding<float>(w).codec_name()) == "f32");
  CHECK(std::string(ember::Embedding<double>(w.cast<double>()).codec_name()) == "f64");
  CHECK(std::string(ember::HalfEmbedding::from_float(w).codec_name()) == "f16");
  CHECK(std::string(ember::BFloat16Embedding::from_float(w).codec_name()) == "bf16");
  const ember::QuantizedEmbedding q(w);
  CHECK(std::string(q.codec_name()) == "int8_rowwise");
  CHECK(q.storage_bytes() == 3 * 16);
  CHECK(ember::HalfEmbedding::from_float(w).storage_bytes() == 3 * 8 * 2);
  STATIC_REQUIRE(ember::EmbeddingTable<ember::Embedding<float>>);
  STATIC_REQUIRE(ember::EmbeddingTable<ember::QuantizedEmbeddingView>);
  STATIC_REQUIRE_FALSE(ember::EmbeddingTable<RowMatrix<float>>);
}

TEST_CASE("the instruction-set namespace is named after this unit's flags", "[table][config]") {
  const std::string isa = ember::isa_name();
  CHECK(isa.rfind("isa_", 0) == 0);
  CHECK(isa == EMBER_ISA_NAME);
  // ember::Embedding is spelled as always: the tag is an inline namespace.
  STATIC_REQUIRE(std::is_same_v<ember::Embedding<float>, ember::EMBER_ISA::Embedding<float>>);
}

TEST_CASE("a view refuses a width its codec cannot hold, naming the next one it can", "[table]") {
  const std::vector<float> data(3 * 12, 1.0f);
  const auto e = ember_test::catch_as<ember::ShapeError>(
      [&] { static_cast<void>(ember::Table<Blocks4, ember::Borrowed>(data.data(), 3, 10)); });
  REQUIRE(e);
  CHECK(std::string(e->what()) ==
        "Blocks4EmbeddingView: the blocks4 format cannot store rows of 10 values (the next width "
        "it holds is 12)");
  CHECK(e->dimension() == 1);
  CHECK(e->expected() == 12);
  CHECK(e->actual() == 10);
  const ember::Table<Blocks4, ember::Borrowed> view(data.data(), 3, 12);
  CHECK(view.forward(std::vector<int>{2}).sum() == 12.0f * view.scale());
}

TEST_CASE("LookupScale::sqrt_d_model is the default scale: sqrt(d_model) in the value type",
          "[table]") {
  const ember::LookupScale s = ember::LookupScale::sqrt_d_model();
  CHECK(s.resolve<float>(16) == 4.0f);
  CHECK(s.resolve<double>(2) == std::sqrt(2.0));
  CHECK(s.resolve<float>(2) == static_cast<float>(std::sqrt(2.0)));  // rounded once, from double
  CHECK(s.resolve<double>(3) == ember::LookupScale{}.resolve<double>(3));
  const RowMatrix<float> w = ember_test::random_table<float>(5, 9, 19);
  const ember::Embedding<float> explicit_default(w, ember::LookupScale::sqrt_d_model());
  const ember::Embedding<float> by_default(w);
  CHECK(explicit_default.scale() == 3.0f);
  const std::vector<TokenId> ids{4, 1};
  CHECK(ember_test::same_bits(explicit_default.forward(ids), by_default.forward(ids)));
  CHECK(ember_test::same_bits(explicit_default.forward(ids),
                              ember_test::lookup_loops<float>(w, ids, 3.0f)));
}

TEST_CASE("logits(hidden, out) refuses an out that overlaps hidden or the table, writing nothing",
          "[table][errors]") {
  // V = 6, d = 4, n = 2: one buffer holds hidden[2, 4] and out[2, 6] on the same rows.
  RowMatrix<float> buf = ember_test::random_table<float>(2, 6, 20);
  const RowMatrix<float> before = buf;
  RowMatrix<float> storage = ember_test::random_table<float>(6, 4, 21);
  const RowMatrix<float> stored = storage;
  const ember::EmbeddingView<float> view(storage.data(), 6, 4);
  const ember::Embedding<float> owner(stored);

  SECTION("out is a block of the same buffer as hidden") {
    const auto by_owner = ember_test::catch_as<ember::OverlapError>(
        [&] { owner.logits(buf.leftCols(4), buf.leftCols(6)); });
    REQUIRE(by_owner);
    CHECK(std::string(by_owner->what()) ==
          "Embedding::logits: out overlaps hidden in memory (out needs its own buffer)");
    CHECK(by_owner->output() == "out");
    CHECK(by_owner->input() == "hidden");
    const auto by_view = ember_test::catch_as<ember::OverlapError>(
        [&] { view.logits(buf.leftCols(4), buf.leftCols(6)); });
    REQUIRE(by_view);
    CHECK(std::string(by_view->what()) ==
          "EmbeddingView::logits: out overlaps hidden in memory (out needs its own buffer)");
    CHECK(ember_test::same_bits(buf, before));
  }
  SECTION("out lies inside the table a view reads") {
    const RowMatrix<float> hidden = ember_test::random_table<float>(2, 4, 22);
    Eigen::Map<RowMatrix<float>> inside(storage.data() + 4, 2, 6);  // rows 1..3 of the table
    const auto e = ember_test::catch_as<ember::OverlapError>([&] { view.logits(hidden, inside); });
    REQUIRE(e);
    CHECK(std::string(e->what()) ==
          "EmbeddingView::logits: out overlaps the table in memory (out needs its own buffer)");
    CHECK(e->input() == "the table");
    CHECK(ember_test::same_bits(storage, stored));
  }
  SECTION("apart, even next to each other, they are fine") {
    RowMatrix<float> both(2, 10);
    both.leftCols(4) = ember_test::random_table<float>(2, 4, 23);
    view.logits(both.leftCols(4), both.rightCols(6));
    CHECK(ember_test::same_bits(RowMatrix<float>(both.rightCols(6)),
                                view.logits(RowMatrix<float>(both.leftCols(4)))));
  }
}

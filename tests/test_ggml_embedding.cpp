// Tests of ember/ggml_embedding.hpp and codec/ggml.hpp: GgmlEmbeddingView over GGUF tensors written
// by GgufWriter, for every type ember decodes. Lookups give GgufFile::load<float>'s rows times the
// scale with one rounding (streamed or not, into blocks, with positions, in bags); views outlive
// the file object; tied logits of 1-8 hidden rows stream the encoded rows within float rounding of
// the decoded table's, and larger batches are the GEMM of each block of decoded rows bit for bit;
// errors are the usual ones.
// SPDX-License-Identifier: MIT
#include "ember/ggml_embedding.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/bag.hpp"
#include "ember/embedding_view.hpp"
#include "ember/errors.hpp"
#include "ember/io/gguf.hpp"
#include "ember/io/gguf_writer.hpp"
#include "ember/positional.hpp"
#include "support/gguf_fixtures.hpp"
#include "support/inputs.hpp"
#include "support/io_files.hpp"
#include "support/matrix_compare.hpp"

using ember::GgmlEmbeddingView;
using ember::Index;
using ember::RowMatrix;
using ember::io::GgmlType;

namespace {

/// Every type the codec decodes, in ggml's id order.
constexpr GgmlType ggml_view_types[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
    GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::BF16};

/// Writes `table` as the tensor "tok" of `type` to a GGUF file at `path`.
void ggml_view_write(const std::string& path, const RowMatrix<float>& table, GgmlType type) {
  ember::io::GgufWriter w;
  w.add("tok", table, type);
  w.save(path);
}

/// ref.row(ids[i]) · s, each product rounded to float once: what a lookup must return.
RowMatrix<float> ggml_view_expected(const RowMatrix<float>& ref, const std::vector<int>& ids,
                                    float s) {
  RowMatrix<float> out(static_cast<Index>(ids.size()), ref.cols());
  for (Index i = 0; i < out.rows(); ++i) {
    for (Index c = 0; c < ref.cols(); ++c) {
      out(i, c) = ref(ids[static_cast<std::size_t>(i)], c) * s;
    }
  }
  return out;
}

/// Checks logits of the view against the decoded table's, computed in double: each logit within
/// the error of a float sum of d products, d · 2^-23 · Σ_c |h[c] · w[c]| (plus a tiny absolute
/// margin for sums that cancel to zero).
void check_logits_close(const RowMatrix<float>& z, const RowMatrix<float>& h,
                        const RowMatrix<float>& w) {
  const Eigen::MatrixXd exact = h.cast<double>() * w.cast<double>().transpose();
  const Eigen::MatrixXd magnitude =
      h.cast<double>().cwiseAbs() * w.cast<double>().cwiseAbs().transpose();
  const double eps = static_cast<double>(h.cols()) * std::ldexp(1.0, -23);
  REQUIRE(z.rows() == exact.rows());
  REQUIRE(z.cols() == exact.cols());
  for (Index i = 0; i < z.rows(); ++i) {
    for (Index j = 0; j < z.cols(); ++j) {
      const double err = std::fabs(static_cast<double>(z(i, j)) - exact(i, j));
      if (err > eps * magnitude(i, j) + 1e-30) {
        FAIL_CHECK("logit (" << i << ", " << j << ") = " << z(i, j) << ", exact " << exact(i, j)
                             << ", bound " << eps * magnitude(i, j));
      }
    }
  }
}

}  // namespace

TEST_CASE("ggml view: lookups are ggml's dequantized rows times the scale, rounded once",
          "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const Index v = 37;
  const Index d = 512;
  const RowMatrix<float> table = ember_test::gguf_normal_table(v, d, 1);
  const auto ids = ember_test::random_ids<int>(50, v, 2);
  // 1100 rows of 512 floats (2.2 MB) take the streaming-store path of large lookups.
  const auto many = ember_test::random_ids<int>(1100, v, 3);
  for (const GgmlType t : ggml_view_types) {
    INFO(to_string(t));
    const std::string path = dir.file(std::string(to_string(t)) + ".gguf");
    ggml_view_write(path, table, t);
    const ember::io::GgufFile f(path);
    const RowMatrix<float> ref = f.load<float>("tok");
    const float s = 1.7f;
    const GgmlEmbeddingView view = f.table("tok", s);

    CHECK(view.vocab_size() == v);
    CHECK(view.d_model() == d);
    CHECK(view.scale() == s);
    CHECK(std::string(view.codec_name()) == std::string(to_string(t)));
    CHECK(view.codec().type() == t);
    CHECK(view.row_bytes() == static_cast<Index>(f.info("tok").row_bytes));
    CHECK(view.data() == f.bytes("tok").data());

    CHECK(ember_test::same_bits(view.forward(ids), ggml_view_expected(ref, ids, s)));
    CHECK(ember_test::same_bits(view.forward(many), ggml_view_expected(ref, many, s)));
    // Into a block of a larger matrix (rows not 32-byte aligned): the same bits, nothing else
    // written.
    RowMatrix<float> big = RowMatrix<float>::Constant(52, d + 3, -7.0f);
    view.forward(ids, big.block(1, 1, 50, d));
    CHECK(ember_test::same_bits(big.block(1, 1, 50, d), ggml_view_expected(ref, ids, s)));
    CHECK((big.row(0).array() == -7.0f).all());
    CHECK((big.col(0).array() == -7.0f).all());
    CHECK((big.rightCols(2).array() == -7.0f).all());
    // Unscaled decoding is load<float>.
    CHECK(ember_test::same_bits(view.dequantize(), ref));
    CHECK(ember_test::same_bits(view.dequantize_row(5), ref.row(5)));
  }
}

TEST_CASE("ggml view: the scale is sqrt(d_model) by default, or the one asked for",
          "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("q8.gguf");
  ggml_view_write(path, ember_test::gguf_normal_table(4, 256, 4), GgmlType::Q8_0);
  const ember::io::GgufFile f(path);
  CHECK(f.table("tok").scale() == 16.0f);
  CHECK(f.table("tok", ember::LookupScale::none()).scale() == 1.0f);
  CHECK(f.table("tok", ember::LookupScale::constant(0.5)).scale() == 0.5f);
  CHECK(f.table("tok", 2.5f).scale() == 2.5f);
  CHECK_THROWS_AS(f.table("tok", std::nanf("")), ember::ValueError);
  CHECK_THROWS_AS(f.table("missing"), ember::KeyError);
}

TEST_CASE("ggml view: the plain types take any width", "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (const Index d : {Index{1}, Index{13}, Index{300}}) {
      INFO(to_string(t) << " d = " << d);
      const RowMatrix<float> table = ember_test::gguf_normal_table(9, d, 5);
      const std::string path = dir.file("plain.gguf");
      ggml_view_write(path, table, t);
      const ember::io::GgufFile f(path);
      const RowMatrix<float> ref = f.load<float>("tok");
      const GgmlEmbeddingView view = f.table("tok", 3.0f);
      const auto ids = ember_test::random_ids<int>(12, 9, 6);
      CHECK(ember_test::same_bits(view.forward(ids), ggml_view_expected(ref, ids, 3.0f)));
      const RowMatrix<float> h = ember_test::gguf_normal_table(3, d, 7);
      check_logits_close(view.logits(h), h, ref);
    }
  }
}

TEST_CASE("ggml view: a view outlives its GgufFile and the file's name", "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("keep.gguf");
  const RowMatrix<float> table = ember_test::gguf_normal_table(16, 256, 8);
  ggml_view_write(path, table, GgmlType::Q4_K);
  RowMatrix<float> ref;
  const GgmlEmbeddingView view = [&] {
    const ember::io::GgufFile f(path);
    ref = f.load<float>("tok");
    return f.table("tok", ember::LookupScale::none());
  }();
  std::filesystem::remove(path);  // the mapping stays valid: the view holds it
  REQUIRE(view.keep_alive() != nullptr);
  const std::vector<int> ids{0, 15, 3, 3};
  CHECK(ember_test::same_bits(view.forward(ids), ggml_view_expected(ref, ids, 1.0f)));
  const GgmlEmbeddingView copy = view;  // copies share the mapping
  CHECK(copy.data() == view.data());
  CHECK(ember_test::same_bits(copy.forward(ids), view.forward(ids)));
}

TEST_CASE(
    "ggml view: logits of 1 to 8 hidden rows are within float rounding of the decoded table's",
    "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const Index v = 21;
  const Index d = 512;
  const RowMatrix<float> table = ember_test::gguf_normal_table(v, d, 9);
  for (const GgmlType t : ggml_view_types) {
    INFO(to_string(t));
    const std::string path = dir.file("logits.gguf");
    ggml_view_write(path, table, t);
    const ember::io::GgufFile f(path);
    const RowMatrix<float> w = f.load<float>("tok");
    const GgmlEmbeddingView view = f.table("tok");
    for (Index n = 1; n <= ember::detail::max_pass_rows; ++n) {
      INFO("n = " << n);
      const RowMatrix<float> h =
          ember_test::gguf_normal_table(n, d, 10 + static_cast<std::uint64_t>(n));
      const RowMatrix<float> z = view.logits(h);
      check_logits_close(z, h, w);
      // Into a block of a larger matrix, from a block of a larger matrix: the same bits.
      RowMatrix<float> hb = RowMatrix<float>::Zero(n + 2, d + 5);
      hb.block(1, 3, n, d) = h;
      RowMatrix<float> out = RowMatrix<float>::Constant(n + 1, v + 4, -1.0f);
      view.logits(hb.block(1, 3, n, d), out.block(1, 2, n, v));
      CHECK(ember_test::same_bits(out.block(1, 2, n, v), z));
      CHECK((out.row(0).array() == -1.0f).all());
      // Each logit is computed alike whatever else is in the call: the same row twice, the same
      // bits twice.
      CHECK(ember_test::same_bits(view.logits(h), z));
    }
    // A float master makes them the master's GEMM.
    GgmlEmbeddingView exact = view;
    exact.set_float_master(w);
    const RowMatrix<float> h = ember_test::gguf_normal_table(2, d, 30);
    CHECK(ember_test::same_bits(exact.logits(h), ember::EmbeddingView<float>(w).logits(h)));
  }
}

TEST_CASE("ggml view: logits of more hidden rows are the GEMM of each decoded block, bit for bit",
          "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const Index d = 256;
  for (const GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16}) {
    // More rows than one decoded block, so two blocks are decoded and multiplied.
    const Index v = t == GgmlType::Q4_K ? ember::detail::logits_block_rows + 37 : 45;
    INFO(to_string(t) << " V = " << v);
    const std::string path = dir.file("gemm.gguf");
    ggml_view_write(path, ember_test::gguf_normal_table(v, d, 11), t);
    const ember::io::GgufFile f(path);
    const RowMatrix<float> w = f.load<float>("tok");
    const GgmlEmbeddingView view = f.table("tok");
    const RowMatrix<float> h = ember_test::gguf_normal_table(64, d, 12);
    const RowMatrix<float> z = view.logits(h);
    // One GEMM per block of logits_block_rows decoded rows: the whole table's product where V
    // fits one block. A short last block is its own product, which Eigen's AVX-512 kernels can
    // round differently from the same rows inside a product over the whole decoded table.
    RowMatrix<float> blocks(h.rows(), v);
    for (Index r0 = 0; r0 < v; r0 += ember::detail::logits_block_rows) {
      const Index len = std::min(ember::detail::logits_block_rows, v - r0);
      blocks.middleCols(r0, len).noalias() = h * w.middleRows(r0, len).transpose();
    }
    CHECK(ember_test::same_bits(z, blocks));
    if (v <= ember::detail::logits_block_rows) {
      CHECK(ember_test::same_bits(z, ember::EmbeddingView<float>(w).logits(h)));
    }
    check_logits_close(z, h, w);
  }
}

TEST_CASE("ggml view: fused positions give forward plus the position rows", "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const Index d = 256;
  const std::string path = dir.file("pos.gguf");
  ggml_view_write(path, ember_test::gguf_normal_table(30, d, 13), GgmlType::Q5_K);
  const ember::io::GgufFile f(path);
  const GgmlEmbeddingView view = f.table("tok");
  const ember::SinusoidalEncoding<float> pe(16, d);
  const auto ids = ember_test::random_ids<int>(12, 30, 14);  // 3 sequences of 4
  RowMatrix<float> out(12, d);
  view.embed_with_positions(pe.table(), ids, out, 4, 2);
  RowMatrix<float> expected = view.forward(ids);
  for (Index i = 0; i < 12; ++i) expected.row(i) += pe.table().row(2 + i % 4);
  CHECK(ember_test::same_bits(out, expected));
}

TEST_CASE("ggml view: bags pool the decoded rows as a float table of them would",
          "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const Index d = 256;
  const std::string path = dir.file("bag.gguf");
  ggml_view_write(path, ember_test::gguf_normal_table(25, d, 15), GgmlType::Q4_1);
  const ember::io::GgufFile f(path);
  const RowMatrix<float> w = f.load<float>("tok");
  const std::vector<int> ids{1, 4, 4, 9, 24, 0, 7};
  const std::vector<int> offsets{0, 3, 3, 5};
  for (const auto mode : {ember::BagMode::sum, ember::BagMode::mean, ember::BagMode::max}) {
    const ember::EmbeddingBag<GgmlEmbeddingView> bag(f.table("tok"), mode);
    const ember::EmbeddingBag<ember::EmbeddingView<float>> plain(ember::EmbeddingView<float>(w),
                                                                 mode);
    CHECK(ember_test::same_bits(bag.forward(ids, offsets), plain.forward(ids, offsets)));
  }
}

TEST_CASE("ggml view: rows in caller memory, with a row stride", "[ggml_embedding]") {
  const Index v = 6;
  const Index d = 64;
  const RowMatrix<float> table = ember_test::gguf_normal_table(v, d, 16);
  const ember::codec::Ggml codec(GgmlType::Q8_0);
  const Index rb = codec.units_per_row(d);
  REQUIRE(rb == 68);
  const Index stride = rb + 12;
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(v * stride), 0xEE);
  RowMatrix<float> ref(v, d);
  for (Index r = 0; r < v; ++r) {
    std::uint8_t* row = bytes.data() + r * stride;
    ember::detail::ggml::quantize(ember::GgmlType::Q8_0, table.row(r).data(), d, row);
    ember::detail::ggml::decode_row(ember::GgmlType::Q8_0, row, d, ref.row(r).data());
  }
  const GgmlEmbeddingView view(codec, bytes.data(), v, d, stride, {},
                               ember::LookupScale::constant(2.0));
  CHECK(view.row_stride() == stride);
  const std::vector<int> ids{5, 0, 2};
  CHECK(ember_test::same_bits(view.forward(ids), ggml_view_expected(ref, ids, 2.0f)));
  check_logits_close(view.logits(ember_test::gguf_normal_table(1, d, 17)),
                     ember_test::gguf_normal_table(1, d, 17), ref);
  // A stride below a packed row is refused.
  CHECK_THROWS_AS(GgmlEmbeddingView(codec, bytes.data(), v, d, rb - 1), ember::ShapeError);
}

TEST_CASE("ggml view: bad ids, shapes and types throw ember's errors and write nothing",
          "[ggml_embedding]") {
  ember_test::ScratchDir dir;
  const Index d = 256;
  const std::string path = dir.file("err.gguf");
  ggml_view_write(path, ember_test::gguf_normal_table(10, d, 18), GgmlType::Q4_K);
  const ember::io::GgufFile f(path);
  const GgmlEmbeddingView view = f.table("tok");

  const std::vector<int> bad{1, 2, 10};
  try {
    (void)view.forward(bad);
    FAIL("accepted id 10");
  } catch (const ember::IndexError& e) {
    CHECK(e.position() == 2);
    CHECK(e.value() == 10);
    CHECK(e.bound() == 10);
    CHECK_THAT(e.what(), Catch::Contains("GgmlEmbeddingView::forward: id 10 at position 2"));
  }
  CHECK_THROWS_AS(view.forward(std::vector<int>{-1}), ember::IndexError);
  RowMatrix<float> out = RowMatrix<float>::Constant(3, d, 5.0f);
  CHECK_THROWS_AS(view.forward(bad, out), ember::IndexError);
  CHECK_THROWS_AS(view.forward(std::vector<int>{1, 2}, out), ember::ShapeError);
  CHECK((out.array() == 5.0f).all());

  CHECK_THROWS_AS(view.logits(RowMatrix<float>::Zero(1, d - 1)), ember::ShapeError);
  RowMatrix<float> z = RowMatrix<float>::Constant(1, 9, 5.0f);
  CHECK_THROWS_AS(view.logits(RowMatrix<float>::Zero(1, d), z), ember::ShapeError);
  CHECK((z.array() == 5.0f).all());

  const ember::SinusoidalEncoding<float> pe(4, d);
  RowMatrix<float> x = RowMatrix<float>::Constant(6, d, 5.0f);
  CHECK_THROWS_AS(view.embed_with_positions(pe.table(), std::vector<int>(6, 1), x, 3, 2),
                  ember::IndexError);
  CHECK_THROWS_AS(view.embed_with_positions(pe.table(), std::vector<int>(6, 11), x, 3),
                  ember::IndexError);
  CHECK((x.array() == 5.0f).all());

  // The codec of a type ember does not decode, and widths a block format cannot hold.
  CHECK_THROWS_AS(ember::codec::Ggml(GgmlType::IQ2_XXS), ember::ValueError);
  CHECK_THROWS_WITH(ember::codec::Ggml(GgmlType::TQ1_0), Catch::Contains("tq1_0"));
  CHECK_FALSE(ember::codec::Ggml(GgmlType::Q4_K).holds_width(96));
  CHECK(ember::codec::Ggml(GgmlType::Q4_0).holds_width(96));
  const std::vector<std::uint8_t> bytes(1024);
  CHECK_THROWS_AS(GgmlEmbeddingView(ember::codec::Ggml(GgmlType::Q4_K), bytes.data(), 2, 96, -1),
                  ember::ShapeError);
}

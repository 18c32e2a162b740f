// Tests of ember/embedding_view.hpp: a view runs the same kernels as Embedding (bit-equal
// results), over strided caller memory and over memory-mapped files that it keeps alive.
// SPDX-License-Identifier: MIT
#include "ember/embedding_view.hpp"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/input_embedding.hpp"
#include "ember/io/npy.hpp"
#include "ember/positional.hpp"
#include "ember/query/similarity.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/io_files.hpp"
#include "support/matrix_compare.hpp"
#if defined(EMBER_TEST_HAVE_IO)
#include "ember/io/safetensors.hpp"
#endif

using ember::EmbeddingView;
using ember::Index;
using ember::RowMatrix;

TEMPLATE_TEST_CASE("a view gives Embedding's lookup, backward, logits and positions bit for bit",
                   "[embedding_view]", float, double) {
  const ember::Embedding<TestType> emb(37, 8, 5);
  const EmbeddingView<TestType> view(emb.weight());
  CHECK(view.vocab_size() == 37);
  CHECK(view.d_model() == 8);
  CHECK(view.scale() == emb.scale());
  CHECK(view.data() == emb.weight().data());  // no copy
  const auto ids = ember_test::random_ids<int>(24, 37, 6);
  CHECK(ember_test::same_bits(view.forward(ids), emb.forward(ids)));
  RowMatrix<TestType> out(24, 8);
  view.forward(ids, out);
  CHECK(ember_test::same_bits(out, emb.forward(ids)));

  const RowMatrix<TestType> g = ember_test::random_table<TestType>(24, 8, 7);
  ember::SparseRowGrad<TestType> a, b;
  view.backward(ids, g, a);
  emb.backward(ids, g, b);
  CHECK(ember_test::same_bits(a.to_dense(), b.to_dense()));

  const RowMatrix<TestType> h = ember_test::random_table<TestType>(3, 8, 8);
  CHECK(ember_test::same_bits(view.logits(h), emb.logits(h)));
  const RowMatrix<TestType> gl = ember_test::random_table<TestType>(3, 37, 9);
  RowMatrix<TestType> gh1(3, 8), gh2(3, 8);
  RowMatrix<TestType> gw1 = RowMatrix<TestType>::Zero(37, 8), gw2 = gw1;
  view.logits_backward(h, gl, gh1, gw1);
  emb.logits_backward(h, gl, gh2, gw2);
  CHECK(ember_test::same_bits(gh1, gh2));
  CHECK(ember_test::same_bits(gw1, gw2));

  const ember::SinusoidalEncoding<TestType> pe(12, 8);
  RowMatrix<TestType> f1(24, 8), f2(24, 8);
  ember::embed_with_positions(view, pe.table(), ids, f1, 6, 3);
  ember::embed_with_positions(emb, pe.table(), ids, f2, 6, 3);
  CHECK(ember_test::same_bits(f1, f2));
}

TEST_CASE("a view over a block of a larger matrix honours the row stride", "[embedding_view]") {
  const RowMatrix<float> big = ember_test::random_table<float>(20, 12, 1);
  const EmbeddingView<float> view(big.block(2, 3, 15, 5));
  CHECK(view.row_stride() == 12);
  const std::vector<int> ids{0, 14, 7};
  const ember::Embedding<float> copy(RowMatrix<float>(big.block(2, 3, 15, 5)));
  CHECK(ember_test::same_bits(view.forward(ids), copy.forward(ids)));
  CHECK(ember_test::same_bits(RowMatrix<float>(view.weight()), copy.weight()));
  // the pointer form, with an explicit stride
  const EmbeddingView<float> raw(big.data() + 2 * 12 + 3, 15, 5, 12);
  CHECK(ember_test::same_bits(raw.forward(ids), copy.forward(ids)));
  // queries take the view's Map without a copy of the caller's table
  const ember::query::Neighbours<float> nn(view.weight());
  const ember::query::Neighbours<float> nn_copy(copy.weight());
  CHECK(nn.nearest(ember::TokenId{3}, 4) == nn_copy.nearest(ember::TokenId{3}, 4));
}

TEST_CASE("a view of a mapped file is zero-copy and keeps the mapping alive",
          "[embedding_view][io]") {
  ember_test::ScratchDir dir;
  const RowMatrix<float> t = ember_test::random_table<float>(64, 16, 2);
  ember::io::save_npy(dir.file("t.npy"), t);
  std::optional<EmbeddingView<float>> view;
  {
    const auto mapped = ember::io::map_npy<float>(dir.file("t.npy"));
    REQUIRE(mapped.zero_copy());
    view.emplace(mapped.view());
    CHECK(view->data() == mapped.matrix().data());
  }  // the MappedTable is gone; the view's keep_alive() holds the mapping
  REQUIRE(view->keep_alive() != nullptr);
  const std::vector<int> ids{63, 0, 5};
  CHECK(ember_test::same_bits(view->forward(ids), ember::Embedding<float>(t).forward(ids)));
#if defined(EMBER_TEST_HAVE_IO)
  ember::io::save_safetensors(dir.file("t.safetensors"), "wte", t);
  const auto st = ember::io::SafetensorsFile(dir.file("t.safetensors")).map<float>("wte").view();
  CHECK(ember_test::same_bits(st.forward(ids), view->forward(ids)));
#endif
}

TEST_CASE("bad views and bad lookups throw and write nothing", "[embedding_view]") {
  const RowMatrix<float> t = RowMatrix<float>::Ones(4, 3);
  CHECK_THROWS_AS(EmbeddingView<float>(nullptr, 4, 3), ember::ValueError);
  CHECK_THROWS_AS(EmbeddingView<float>(t.data(), 0, 3), ember::ShapeError);
  CHECK_THROWS_WITH(EmbeddingView<float>(t.data(), 4, 3, 2),
                    Catch::Contains("row_stride 2 is smaller than d_model = 3"));
  const EmbeddingView<float> view(t);
  RowMatrix<float> out = RowMatrix<float>::Constant(2, 3, 7.0f);
  const auto e = ember_test::catch_as<ember::IndexError>([&] {
    view.forward(std::vector<int>{1, 4}, out);
  });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("EmbeddingView::forward: id 4 at position 1"));
  CHECK(out.isConstant(7.0f));
  RowMatrix<float> wrong(3, 3);
  CHECK_THROWS_AS(view.forward(std::vector<int>{1, 2}, wrong), ember::ShapeError);
  ember::SparseRowGrad<float> g;
  CHECK_THROWS_AS(view.backward(std::vector<int>{1, 9}, RowMatrix<float>::Ones(2, 3), g),
                  ember::IndexError);
  CHECK(g.empty());
}

TEST_CASE("a view checks the width of grad_out before binding an empty gradient",
          "[embedding_view]") {
  const RowMatrix<float> t = RowMatrix<float>::Ones(4, 3);
  const EmbeddingView<float> view(t);
  ember::SparseRowGrad<float> g;
  ember_test::check_grad_out_width_refused(
      [&] {
        view.backward(std::vector<int>{1, 2}, RowMatrix<float>::Ones(2, 5), g);
      },
      "EmbeddingView::backward: grad_out has 5 columns, expected d_model = 3", 3, 5, g);
  view.backward(std::vector<int>{1}, RowMatrix<float>::Ones(1, 3), g);
  CHECK(g.d_model() == 3);
}

TEST_CASE("a view refuses a negative row stride other than -1 and a misaligned pointer",
          "[embedding_view]") {
  const RowMatrix<double> t = RowMatrix<double>::Ones(4, 3);
  const auto neg = ember_test::catch_as<ember::ShapeError>(
      [&] { (void)EmbeddingView<double>(t.data(), 4, 3, -2); });
  REQUIRE(neg);
  CHECK(std::string(neg->what()) ==
        "EmbeddingView: row_stride -2 is negative (the only negative value allowed is -1, "
        "meaning d_model = 3)");
  CHECK(neg->expected() == 3);
  CHECK(neg->actual() == -2);
  CHECK(EmbeddingView<double>(t.data(), 4, 3, -1).row_stride() == 3);
  const auto* odd = reinterpret_cast<const double*>(reinterpret_cast<const char*>(t.data()) + 4);
  const auto e =
      ember_test::catch_as<ember::ValueError>([&] { (void)EmbeddingView<double>(odd, 2, 3); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::StartsWith("EmbeddingView: data address ") &&
                            Catch::EndsWith(" is not aligned to 8 bytes"));
  CHECK(e->value() == 4.0);
}

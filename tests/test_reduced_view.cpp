// Tests of ember/reduced_view.hpp: a 16-bit view gives ReducedEmbedding's results bit for bit on
// the same bytes, over strided caller memory and over F16/BF16 safetensors and '<f2' .npy maps
// that it serves without a copy and keeps alive; bad input throws typed errors and writes nothing.
// SPDX-License-Identifier: MIT
#include "ember/reduced_view.hpp"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/input_embedding.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/npy.hpp"
#include "ember/positional.hpp"
#include "ember/query/similarity.hpp"
#include "ember/reduced.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/io_files.hpp"
#include "support/matrix_compare.hpp"
#include "support/reduced_view_reference.hpp"
#if defined(EMBER_TEST_HAVE_IO)
#include "ember/io/safetensors.hpp"
#endif

using ember::Index;
using ember::ReducedEmbeddingView;
using ember::RowMatrix;

namespace {

/// The mapped file a view keeps alive (views of maps hold their MappedFile).
std::shared_ptr<const ember::detail::MappedFile> mapping_of(const std::shared_ptr<const void>& p) {
  return std::static_pointer_cast<const ember::detail::MappedFile>(p);
}

/// Every operation of `view` against `table` (a ReducedEmbedding over the same values): the view
/// must return the same bits.
template <class S>
void check_same_as_table(const ReducedEmbeddingView<S>& view,
                         const ember::ReducedEmbedding<S>& table) {
  const Index v = table.vocab_size(), d = table.d_model();
  REQUIRE(view.vocab_size() == v);
  REQUIRE(view.d_model() == d);
  CHECK(view.scale() == table.scale());
  const auto ids = ember_test::random_ids<int>(28, v, 11);
  CHECK(ember_test::same_bits(view.forward(ids), table.forward(ids)));
  CHECK(ember_test::same_bits(view.forward(ids),
                              ember_test::reduced_lookup_reference(view.weight(), ids)));
  RowMatrix<float> out(28, d);
  view.forward(ids, out);
  CHECK(ember_test::same_bits(out, table.forward(ids)));
  RowMatrix<S> xs(28, d), xs2(28, d);
  view.forward(ids, xs);
  table.forward(ids, xs2);
  CHECK(ember_test::same_bits(xs, xs2));

  const RowMatrix<float> g = ember_test::random_table<float>(28, d, 12);
  ember::SparseRowGrad<float> a, b;
  view.backward(ids, g, a);
  table.backward(ids, g, b);
  CHECK(ember_test::same_bits(a.to_dense(), b.to_dense()));

  const RowMatrix<float> h = ember_test::random_table<float>(3, d, 13);
  CHECK(ember_test::same_bits(view.logits(h), table.logits(h)));
  const RowMatrix<float> gl = ember_test::random_table<float>(3, v, 14);
  RowMatrix<float> gh1(3, d), gh2(3, d);
  RowMatrix<float> gw1 = RowMatrix<float>::Zero(v, d), gw2 = gw1;
  view.logits_backward(h, gl, gh1, gw1);
  table.logits_backward(h, gl, gh2, gw2);
  CHECK(ember_test::same_bits(gh1, gh2));
  CHECK(ember_test::same_bits(gw1, gw2));

  const ember::SinusoidalEncoding<float> pe(12, d);
  RowMatrix<float> f1(28, d), f2(28, d);
  ember::embed_with_positions(view, pe.table(), ids, f1, 7, 4);
  ember::embed_with_positions(table, pe.table(), ids, f2, 7, 4);
  CHECK(ember_test::same_bits(f1, f2));
  const RowMatrix<float> pt = pe.table();
  ember_test::check_close(f1, ember_test::reduced_lookup_reference(view.weight(), ids, &pt, 7, 4));
}

}  // namespace

TEMPLATE_TEST_CASE("a 16-bit view gives ReducedEmbedding's results bit for bit without a copy",
                   "[reduced_view]", Eigen::half, Eigen::bfloat16) {
  const RowMatrix<float> t = ember_test::random_table<float>(ember::detail::logits_block_rows + 37,
                                                             8, 1);  // two logits blocks
  const auto table = ember::ReducedEmbedding<TestType>::from_float(t);
  const ReducedEmbeddingView<TestType> view(table.weight());
  CHECK(view.data() == table.weight().data());  // no copy
  CHECK(view.row_stride() == 8);
  CHECK(view.keep_alive() == nullptr);
  CHECK(view.float_master() == nullptr);
  check_same_as_table(view, table);
  CHECK(ember_test::same_bits(view.to_float(), table.to_float()));

  // the pointer form, and the ReducedEmbedding form (which borrows the float master)
  const ReducedEmbeddingView<TestType> raw(table.weight().data(), table.vocab_size(), 8);
  check_same_as_table(raw, table);
  const auto kept = ember::ReducedEmbedding<TestType>::from_float(t, /*keep_float_master=*/true);
  const ReducedEmbeddingView<TestType> borrowed(kept);
  REQUIRE(borrowed.float_master() == kept.float_master());
  check_same_as_table(borrowed, kept);
}

TEMPLATE_TEST_CASE("a 16-bit view keeps its own float master for logits", "[reduced_view]",
                   Eigen::half, Eigen::bfloat16) {
  const RowMatrix<float> t = ember_test::random_table<float>(40, 6, 2);
  const auto table = ember::ReducedEmbedding<TestType>::from_float(t, true);
  ReducedEmbeddingView<TestType> view(table.weight());
  view.set_float_master(t);
  REQUIRE(view.float_master() != nullptr);
  const RowMatrix<float> h = ember_test::random_table<float>(4, 6, 3);
  CHECK(ember_test::same_bits(view.logits(h), table.logits(h)));
  const ReducedEmbeddingView<TestType> copy = view;  // copies share the master
  CHECK(copy.float_master() == view.float_master());
  view.clear_float_master();
  CHECK(view.float_master() == nullptr);
  CHECK(copy.float_master() != nullptr);
}

TEST_CASE("a 16-bit view over a block of a larger matrix honours the row stride",
          "[reduced_view]") {
  const RowMatrix<float> big = ember_test::random_table<float>(20, 12, 4);
  const RowMatrix<Eigen::half> stored = big.cast<Eigen::half>();
  const ReducedEmbeddingView<Eigen::half> view(stored.block(2, 3, 15, 5));
  CHECK(view.row_stride() == 12);
  const ember::HalfEmbedding packed(RowMatrix<Eigen::half>(stored.block(2, 3, 15, 5)));
  check_same_as_table(view, packed);
  const ReducedEmbeddingView<Eigen::half> raw(stored.data() + 2 * 12 + 3, 15, 5, 12);
  check_same_as_table(raw, packed);
  // queries take the view's Map (converted to float by Neighbours)
  const ember::query::Neighbours<float> nn(view.weight());
  const ember::query::Neighbours<float> nn_packed(packed.to_float());
  CHECK(nn.nearest(ember::TokenId{3}, 4) == nn_packed.nearest(ember::TokenId{3}, 4));
}

TEST_CASE("a '<f2' .npy maps to a half view with no copy; '>f2' is copied; f4 is refused",
          "[reduced_view][io]") {
  ember_test::ScratchDir dir;
  const RowMatrix<float> t = ember_test::random_table<float>(33, 16, 5);
  ember::io::save_npy(dir.file("h.npy"), t, {ember::io::NpyDtype::f2});
  const ember::HalfEmbedding expected = ember::HalfEmbedding::from_float(t);
  std::optional<ember::HalfEmbeddingView> view;
  {
    const auto mapped = ember::io::map_npy<Eigen::half>(dir.file("h.npy"));
    REQUIRE(mapped.zero_copy());
    view.emplace(mapped.view());
  }  // the MappedTable is gone; the view holds the mapping
  const auto file = mapping_of(view->keep_alive());
  REQUIRE(file != nullptr);
  CHECK(ember_test::lies_within(view->data(), 33 * 16 * 2, file->data(), file->size()));
  check_same_as_table(*view, expected);

  // big-endian: the same values through an owning copy
  auto bytes = ember_test::read_bytes(dir.file("h.npy"));
  const auto header = ember::io::read_npy_header(dir.file("h.npy"));
  const std::string text(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(64));
  const auto at = text.find("<f2");
  REQUIRE(at != std::string::npos);
  bytes[at] = '>';
  for (std::size_t i = header.data_offset; i + 1 < bytes.size(); i += 2)
    std::swap(bytes[i], bytes[i + 1]);
  ember_test::write_bytes(dir.file("be.npy"), bytes);
  const auto be = ember::io::map_npy<Eigen::half>(dir.file("be.npy"));
  CHECK_FALSE(be.zero_copy());
  check_same_as_table(be.view(), expected);

  // f4 data is not rounded behind the caller's back
  ember::io::save_npy(dir.file("f.npy"), t);
  const auto e = ember_test::catch_as<ember::FormatError>(
      [&] { (void)ember::io::map_npy<Eigen::half>(dir.file("f.npy")); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("the data is f4, map_npy<half> needs f2"));
  CHECK(e->path() == dir.file("f.npy"));
  CHECK(e->offset() == ember::io::read_npy_header(dir.file("f.npy")).data_offset);

  // a non-finite value is reported unless allowed
  RowMatrix<float> bad = t;
  bad(4, 2) = INFINITY;
  ember::io::save_npy(dir.file("inf.npy"), bad, {ember::io::NpyDtype::f2});
  CHECK_THROWS_WITH(ember::io::map_npy<Eigen::half>(dir.file("inf.npy")),
                    Catch::Contains("non-finite value at row 4, column 2"));
  ember::io::NpyLoadOptions allow;
  allow.allow_non_finite = true;
  CHECK(ember::io::map_npy<Eigen::half>(dir.file("inf.npy"), allow).zero_copy());
}

#if defined(EMBER_TEST_HAVE_IO)
TEMPLATE_TEST_CASE("an F16/BF16 safetensors tensor maps to a 16-bit view with no copy",
                   "[reduced_view][io]", Eigen::half, Eigen::bfloat16) {
  ember_test::ScratchDir dir;
  const RowMatrix<float> t = ember_test::random_table<float>(70, 24, 6);
  const auto dtype = std::is_same_v<TestType, Eigen::half> ? ember::io::SafetensorsDtype::F16
                                                           : ember::io::SafetensorsDtype::BF16;
  ember::io::SafetensorsWriter w;
  w.add("wte", t, dtype).add("f32", t);
  w.save(dir.file("m.safetensors"));
  std::optional<ReducedEmbeddingView<TestType>> view;
  {
    const ember::io::SafetensorsFile f(dir.file("m.safetensors"));
    const auto mapped = f.map<TestType>("wte");
    REQUIRE(mapped.zero_copy());
    view.emplace(mapped.view());
    // the same bytes, as ReducedEmbedding loads them
    const ember::ReducedEmbedding<TestType> table(f.load_reduced<TestType>("wte"));
    check_same_as_table(*view, table);
    const auto& ti = f.info("wte");
    const auto file = mapping_of(view->keep_alive());
    REQUIRE(file != nullptr);
    CHECK(static_cast<const void*>(view->data()) ==
          static_cast<const void*>(file->data() + f.data_offset() + ti.begin));
    CHECK(ember_test::lies_within(view->data(), 70 * 24 * 2, file->data(), file->size()));
  }  // the file object and the MappedTable are gone; the view still serves
  const auto ids = ember_test::random_ids<int>(10, 70, 7);
  CHECK(ember_test::same_bits(view->forward(ids),
                              ember::ReducedEmbedding<TestType>::from_float(t).forward(ids)));
}

TEST_CASE("mapping a safetensors tensor of another dtype as 16-bit is a FormatError",
          "[reduced_view][io]") {
  ember_test::ScratchDir dir;
  const RowMatrix<float> t = ember_test::random_table<float>(5, 4, 8);
  ember::io::SafetensorsWriter w;
  w.add("f32", t).add("bf16", t, ember::io::SafetensorsDtype::BF16);
  w.save(dir.file("m.safetensors"));
  const ember::io::SafetensorsFile f(dir.file("m.safetensors"));
  const auto e = ember_test::catch_as<ember::FormatError>([&] { (void)f.map<Eigen::half>("f32"); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("tensor 'f32' has dtype F32, map<half> needs F16") &&
                            Catch::Contains("load_reduced"));
  CHECK(e->path() == dir.file("m.safetensors"));
  CHECK(e->offset() == f.data_offset() + f.info("f32").begin);
  CHECK_THROWS_WITH(f.map<Eigen::half>("bf16"),
                    Catch::Contains("has dtype BF16, map<half> needs F16"));
  CHECK_THROWS_WITH(f.map<Eigen::bfloat16>("f32"),
                    Catch::Contains("has dtype F32, map<bfloat16> needs BF16"));
  CHECK_THROWS_AS(f.map<Eigen::half>("missing"), ember::KeyError);
  // the float map of a 16-bit tensor still converts (unchanged behaviour)
  CHECK_FALSE(f.map<float>("bf16").zero_copy());

  // a tensor that is not a 2-D table is refused before any dtype question
  {
    const std::string header = R"({"x":{"dtype":"F16","shape":[2,2,1],"data_offsets":[0,8]}})";
    std::vector<unsigned char> bytes(8, 0);
    for (std::size_t k = 0; k < 8; ++k)
      bytes[k] = static_cast<unsigned char>((header.size() >> (8 * k)) & 0xFFu);
    ember_test::append(bytes, ember_test::bytes_of(header));
    bytes.resize(bytes.size() + 8, 0);
    ember_test::write_bytes(dir.file("3d.safetensors"), bytes);
    const ember::io::SafetensorsFile g3(dir.file("3d.safetensors"));
    const auto e3 =
        ember_test::catch_as<ember::FormatError>([&] { (void)g3.map<Eigen::half>("x"); });
    REQUIRE(e3);
    CHECK_THAT(e3->what(), Catch::Contains("tensor 'x' has 3 dimensions, expected a 2-D table"));
    CHECK(e3->offset() == g3.data_offset());
  }

  // non-finite values are found in the mapped bits
  RowMatrix<float> bad = t;
  bad(3, 1) = NAN;
  ember::io::save_safetensors(dir.file("nan.safetensors"), "h", bad,
                              ember::io::SafetensorsDtype::F16);
  const ember::io::SafetensorsFile g(dir.file("nan.safetensors"));
  CHECK_THROWS_WITH(g.map<Eigen::half>("h"),
                    Catch::Contains("non-finite value at row 3, column 1"));
  ember::io::SafetensorsLoadOptions allow;
  allow.allow_non_finite = true;
  CHECK(g.map<Eigen::half>("h", allow).zero_copy());
}
#endif

TEST_CASE("bad 16-bit views and bad lookups throw typed errors and write nothing",
          "[reduced_view]") {
  const RowMatrix<Eigen::half> t = RowMatrix<float>::Ones(4, 3).cast<Eigen::half>();
  using View = ember::HalfEmbeddingView;
  CHECK_THROWS_AS(View(nullptr, 4, 3), ember::ValueError);
  const auto shape = ember_test::catch_as<ember::ShapeError>([&] { (void)View(t.data(), 0, 3); });
  REQUIRE(shape);
  CHECK_THAT(shape->what(),
             Catch::Contains("ReducedEmbeddingView: vocab_size must be positive, got 0"));
  CHECK_THROWS_WITH(View(t.data(), 4, 3, 2),
                    Catch::Contains("row_stride 2 is smaller than d_model = 3"));
  const auto* odd =
      reinterpret_cast<const Eigen::half*>(reinterpret_cast<const char*>(t.data()) + 1);
  CHECK_THROWS_WITH(View(odd, 2, 3), Catch::Contains("is not aligned to 2 bytes"));

  const View view(t);
  RowMatrix<float> out = RowMatrix<float>::Constant(3, 3, 7.0f);
  const auto e = ember_test::catch_as<ember::IndexError>([&] {
    view.forward(std::vector<int>{1, 0, 4}, out);
  });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("ReducedEmbeddingView::forward: id 4 at position 2 is "
                                        "outside [0, 4)"));
  CHECK(e->position() == 2);
  CHECK(e->value() == 4);
  CHECK(e->bound() == 4);
  CHECK(out.isConstant(7.0f));
  const auto neg = ember_test::catch_as<ember::IndexError>(
      [&] { (void)view.forward(std::vector<std::int64_t>{-1}); });
  REQUIRE(neg);
  CHECK(neg->value() == -1);
  RowMatrix<Eigen::half> out16 = RowMatrix<Eigen::half>::Constant(2, 3, Eigen::half(5.0f));
  CHECK_THROWS_AS(view.forward(std::vector<int>{0, 9}, out16), ember::IndexError);
  CHECK(out16.cast<float>().isConstant(5.0f));
  RowMatrix<float> wrong(3, 2);
  CHECK_THROWS_AS(view.forward(std::vector<int>{1, 2, 3}, wrong), ember::ShapeError);

  ember::SparseRowGrad<float> g;
  CHECK_THROWS_AS(view.backward(std::vector<int>{1, 9}, RowMatrix<float>::Ones(2, 3), g),
                  ember::IndexError);
  CHECK_THROWS_AS(view.backward(std::vector<int>{1, 2}, RowMatrix<float>::Ones(3, 3), g),
                  ember::ShapeError);
  CHECK(g.empty());

  CHECK_THROWS_AS(view.logits(RowMatrix<float>::Zero(2, 4)), ember::ShapeError);
  RowMatrix<float> gh = RowMatrix<float>::Constant(2, 3, 1.0f), gw = RowMatrix<float>::Zero(4, 3);
  CHECK_THROWS_AS(
      view.logits_backward(RowMatrix<float>::Zero(2, 3), RowMatrix<float>::Zero(2, 5), gh, gw),
      ember::ShapeError);
  CHECK(gh.isConstant(1.0f));
  CHECK(gw.isZero());

  View master_less = view;
  const auto me = ember_test::catch_as<ember::ShapeError>(
      [&] { master_less.set_float_master(RowMatrix<float>::Zero(4, 2)); });
  REQUIRE(me);
  CHECK(me->expected() == 3);
  CHECK(me->actual() == 2);
  CHECK(master_less.float_master() == nullptr);

  const ember::SinusoidalEncoding<float> pe(4, 3);
  RowMatrix<float> fused = RowMatrix<float>::Constant(2, 3, 3.0f);
  CHECK_THROWS_AS(
      ember::embed_with_positions(view, pe.table(), std::vector<int>{0, 1}, fused, 2, 3),
      ember::IndexError);
  CHECK_THROWS_AS(ember::embed_with_positions(view, pe.table(), std::vector<int>{0, 4}, fused, 2),
                  ember::IndexError);
  CHECK(fused.isConstant(3.0f));
}

TEMPLATE_TEST_CASE(
    "a view of a ReducedEmbedding keeps the master it shared when the table drops it",
    "[reduced_view]", Eigen::half, Eigen::bfloat16) {
  const RowMatrix<float> t = ember_test::random_table<float>(30, 5, 4);
  auto table = ember::ReducedEmbedding<TestType>::from_float(t, /*keep_float_master=*/true);
  const ReducedEmbeddingView<TestType> view(table);
  const RowMatrix<float> h = ember_test::random_table<float>(3, 5, 5);
  const RowMatrix<float> expected = table.logits(h);  // from the master
  REQUIRE(ember_test::same_bits(view.logits(h), expected));

  table.clear_float_master();  // the view shares ownership: its master is still alive
  REQUIRE(view.float_master() != nullptr);
  CHECK(ember_test::same_bits(*view.float_master(), t));
  CHECK(ember_test::same_bits(view.logits(h), expected));
  table.set_float_master(RowMatrix<float>::Zero(30, 5));  // nor does a replacement reach it
  CHECK(ember_test::same_bits(view.logits(h), expected));
  CHECK(table.logits(h).isZero());
}

TEST_CASE(
    "a 16-bit view checks grad_out's width and the stride's sign; an owner's master keeps its "
    "shape",
    "[reduced_view]") {
  const RowMatrix<Eigen::half> t = RowMatrix<float>::Ones(4, 3).cast<Eigen::half>();
  using View = ember::HalfEmbeddingView;
  const View view(t);
  ember::SparseRowGrad<float> g;
  ember_test::check_grad_out_width_refused(
      [&] {
        view.backward(std::vector<int>{1, 2}, RowMatrix<float>::Ones(2, 4), g);
      },
      "ReducedEmbeddingView::backward: grad_out has 4 columns, expected d_model = 3", 3, 4, g);

  const auto neg = ember_test::catch_as<ember::ShapeError>([&] { (void)View(t.data(), 4, 3, -3); });
  REQUIRE(neg);
  CHECK(std::string(neg->what()) ==
        "ReducedEmbeddingView: row_stride -3 is negative (the only negative value allowed is -1, "
        "meaning d_model = 3)");
  CHECK(neg->actual() == -3);
  CHECK(View(t.data(), 4, 3, -1).row_stride() == 3);

  // a ReducedEmbedding that keeps a master cannot be given another shape through weight(): it
  // is a fixed-shape view of the stored values, so the master always matches the table
  auto owner = ember::HalfEmbedding::from_float(RowMatrix<float>::Ones(4, 3), true);
  STATIC_REQUIRE(std::is_same_v<decltype(owner.weight()), Eigen::Map<RowMatrix<Eigen::half>>>);
  owner.weight() = RowMatrix<float>::Constant(4, 3, 2.0f).cast<Eigen::half>();
  CHECK(owner.logits(RowMatrix<float>::Ones(2, 3)).isConstant(3.0f));  // the master's rows
  owner.clear_float_master();                                          // decoding the new rows
  CHECK(owner.logits(RowMatrix<float>::Ones(2, 3)).isConstant(6.0f));
}

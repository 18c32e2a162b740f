// Tests of ember/check.hpp (find_non_finite, check_finite, all_finite) and of the optimizers'
// opt-in check_finite option: a NaN or infinity is reported with its row and column instead of
// spreading into the table, and nothing changes when it is reported.
#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/check.hpp"
#include "ember/embedding.hpp"
#include "ember/optim.hpp"
#include "ember/sparse_grad.hpp"

namespace {
template <class T>
const T kNaN = std::numeric_limits<T>::quiet_NaN();
template <class T>
const T kInf = std::numeric_limits<T>::infinity();
}  // namespace

TEMPLATE_TEST_CASE("find_non_finite returns the first NaN or Inf in row-major order", "[check]",
                   float, double) {
  using T = TestType;
  ember::RowMatrix<T> m = ember::RowMatrix<T>::Ones(3, 4);
  CHECK_FALSE(ember::find_non_finite(m).has_value());
  CHECK_FALSE(ember::find_non_finite(ember::RowMatrix<T>(0, 5)).has_value());
  m(2, 0) = kInf<T>;
  m(1, 3) = kNaN<T>;
  const auto at = ember::find_non_finite(m);
  REQUIRE(at.has_value());
  CHECK(at->row == 1);
  CHECK(at->col == 3);
  CHECK(std::isnan(at->value));
  // A strided block of a larger matrix: coordinates are the block's.
  const auto block = ember::find_non_finite(m.block(1, 0, 2, 3));
  REQUIRE(block.has_value());
  CHECK(block->row == 1);
  CHECK(block->col == 0);
  CHECK(block->value == kInf<double>);
}

TEMPLATE_TEST_CASE("check_finite names what, the row, the column and the value", "[check]", float,
                   double) {
  using T = TestType;
  ember::RowMatrix<T> m = ember::RowMatrix<T>::Zero(2, 3);
  CHECK_NOTHROW(ember::check_finite(m, "grad_hidden"));
  m(1, 2) = -kInf<T>;
  const ember::RowMatrix<T> before = m;
  CHECK_THROWS_MATCHES(
      ember::check_finite(m, "grad_hidden"), ember::ValueError,
      Catch::Matchers::Message("grad_hidden: value at row 1, column 2 is -inf (not finite)"));
  try {
    ember::check_finite(m, "g");
  } catch (const ember::ValueError& e) {
    CHECK(e.value() == -kInf<double>);
  }
  CHECK(m == before);
}

TEMPLATE_TEST_CASE("check_finite on a sparse gradient names the table row, not the slot", "[check]",
                   float, double) {
  using T = TestType;
  ember::SparseRowGrad<T> g(10, 2);
  const std::vector<ember::TokenId> ids = {7, 2};
  ember::RowMatrix<T> rows(2, 2);
  rows << 1, 2, 3, kNaN<T>;
  CHECK(ember::all_finite(g));
  g.accumulate(ids, rows, T(1), 10);
  CHECK_FALSE(ember::all_finite(g));
  // Row 2 is stored first (slot 0), row 7 second; the NaN is in table row 2, column 1.
  CHECK_THROWS_MATCHES(ember::check_finite(g, "SparseRowGrad"), ember::ValueError,
                       Catch::Matchers::Message(
                           "SparseRowGrad: value at table row 2, column 1 is nan (not finite)"));
}

namespace {

template <class Opt>
void check_optimizer_reports_nan(const char* where, typename Opt::Options base) {
  using T = float;
  ember::Embedding<T> emb(6, 3, /*seed=*/1);
  ember::SparseRowGrad<T> g(6, 3);
  const std::vector<ember::TokenId> ids = {4, 1};
  ember::RowMatrix<T> rows = ember::RowMatrix<T>::Ones(2, 3);
  rows(0, 2) = kNaN<T>;  // lands in table row 4
  g.accumulate(ids, rows, T(1), 6);

  base.check_finite = true;
  Opt checked(base);
  // One clean step first, so there is state that must stay untouched.
  ember::SparseRowGrad<T> clean(6, 3);
  const ember::RowMatrix<T> ones = ember::RowMatrix<T>::Ones(1, 3);
  const std::vector<ember::TokenId> one = {1};
  clean.accumulate(one, ones, T(1), 6);
  checked.step(emb, clean);
  const ember::RowMatrix<T> table_before = emb.weight();
  CHECK_THROWS_MATCHES(
      checked.step(emb, g), ember::ValueError,
      Catch::Matchers::Message(
          std::string(where) +
          ": sparse gradient: value at table row 4, column 2 is nan (not finite)"));
  CHECK(emb.weight() == table_before);
  // The dense path is checked too.
  ember::RowMatrix<T> dense = ember::RowMatrix<T>::Zero(6, 3);
  dense(5, 0) = kInf<T>;
  CHECK_THROWS_MATCHES(
      checked.step(emb, dense), ember::ValueError,
      Catch::Matchers::Message(std::string(where) +
                               ": dense gradient: value at row 5, column 0 is inf (not finite)"));
  CHECK(emb.weight() == table_before);

  // The default (no scan): the NaN reaches the table, which is why the option exists.
  base.check_finite = false;
  Opt unchecked(base);
  unchecked.step(emb, g);
  CHECK_FALSE(emb.weight().row(4).allFinite());
  CHECK(emb.weight().row(0) == table_before.row(0));
}

}  // namespace

TEST_CASE("optimizers with check_finite report a NaN gradient and change nothing",
          "[check][optim]") {
  struct SGDT : ember::optim::SGD<float> {
    using Options = ember::optim::SGDOptions;
    using ember::optim::SGD<float>::SGD;
  };
  struct AdamT : ember::optim::Adam<float> {
    using Options = ember::optim::AdamOptions;
    using ember::optim::Adam<float>::Adam;
  };
  struct AdagradT : ember::optim::RowwiseAdagrad<float> {
    using Options = ember::optim::AdagradOptions;
    using ember::optim::RowwiseAdagrad<float>::RowwiseAdagrad;
  };
  check_optimizer_reports_nan<SGDT>("SGD::step", {.lr = 0.1, .momentum = 0.9});
  check_optimizer_reports_nan<AdamT>("Adam::step", {.lr = 0.01});
  check_optimizer_reports_nan<AdagradT>("RowwiseAdagrad::step", {.lr = 0.1});
}

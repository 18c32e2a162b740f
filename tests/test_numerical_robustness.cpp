// Numerical robustness: gradients and optimizer steps stay finite at the edges - logits of
// magnitude 1e36 (through a max-shifted softmax), d = 1, V = 1, zero rows, gradients of 1e18 - and
// a gradient whose square would overflow Adam's second moment is tamed by ClipGroup first (the
// documented policy, docs/reliability.md).
#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/check.hpp"
#include "ember/clip.hpp"
#include "ember/embedding.hpp"
#include "ember/optim.hpp"
#include "ember/query/similarity.hpp"
#include "ember/sparse_grad.hpp"

namespace {

/// d(cross-entropy)/d(logits) of row-wise softmax, computed stably (max-shifted): p - onehot.
template <class T>
ember::RowMatrix<T> softmax_xent_grad(const ember::RowMatrix<T>& logits,
                                      const std::vector<ember::TokenId>& targets) {
  ember::RowMatrix<T> g(logits.rows(), logits.cols());
  for (ember::Index i = 0; i < logits.rows(); ++i) {
    const T m = logits.row(i).maxCoeff();
    g.row(i) = (logits.row(i).array() - m).exp().matrix();
    g.row(i) /= g.row(i).sum();
    g(i, targets[static_cast<std::size_t>(i)]) -= T(1);
  }
  return g;
}

template <class T>
void train_steps(ember::Embedding<T>& emb, const ember::RowMatrix<T>& hidden,
                 const std::vector<ember::TokenId>& ids, bool clip) {
  ember::optim::Adam<T> adam({.lr = 1e-3, .check_finite = true});
  ember::optim::SGD<T> sgd({.lr = 1e-3, .momentum = 0.9, .check_finite = true});
  ember::optim::RowwiseAdagrad<T> adagrad({.lr = 1e-3, .check_finite = true});
  for (int step = 0; step < 3; ++step) {
    const ember::RowMatrix<T> lg = emb.logits(hidden);
    REQUIRE(lg.allFinite());
    const ember::RowMatrix<T> g_logits = softmax_xent_grad(lg, ids);
    REQUIRE(g_logits.allFinite());
    ember::RowMatrix<T> g_hidden(hidden.rows(), hidden.cols());
    ember::RowMatrix<T> g_weight = ember::RowMatrix<T>::Zero(emb.vocab_size(), emb.d_model());
    emb.logits_backward(hidden, g_logits, g_hidden, g_weight);
    ember::SparseRowGrad<T> g_input;
    emb.backward(ids, g_hidden, g_input);
    CHECK_NOTHROW(ember::check_finite(g_hidden, "grad_hidden"));
    CHECK_NOTHROW(ember::check_finite(g_weight, "grad_weight"));
    CHECK_NOTHROW(ember::check_finite(g_input, "grad_input"));
    if (clip) {
      ember::ClipGroup<T> group;
      group.add_tied(g_input, g_weight);
      const double norm = group.clip(1.0);
      CHECK(std::isfinite(norm));
    }
    adam.step(emb, g_input, g_weight);
    sgd.step(emb, g_input, g_weight);
    adagrad.step(emb, g_input, g_weight);
    REQUIRE(emb.weight().allFinite());
  }
}

}  // namespace

TEMPLATE_TEST_CASE("huge logits give finite gradients and finite steps", "[reliability][numerics]",
                   float, double) {
  using T = TestType;
  // Logits of order 1e36 (float max is 3.4e38): a naive exp() overflows, the shifted softmax
  // does not; gradients of order 1e18 reach the table and are clipped before the optimizers.
  ember::RowMatrix<T> table(4, 2);
  table << T(1e18), T(-1e18), T(-1e18), T(1e18), T(0), T(0), T(5e17), T(5e17);
  ember::Embedding<T> emb(table);
  ember::RowMatrix<T> hidden(3, 2);
  hidden << T(1e18), T(0), T(0), T(-1e18), T(1e18), T(1e18);
  train_steps(emb, hidden, {1, 2, 3}, /*clip=*/true);
}

TEMPLATE_TEST_CASE("d = 1 and V = 1 tables train and query without NaN", "[reliability][numerics]",
                   float, double) {
  using T = TestType;
  for (const auto& [v, d] : {std::pair<ember::Index, ember::Index>{1, 1}, {1, 7}, {9, 1}}) {
    INFO("V = " << v << ", d = " << d);
    ember::Embedding<T> emb(v, d, /*seed=*/5);
    ember::RowMatrix<T> hidden = ember::RowMatrix<T>::Constant(2, d, T(3));
    train_steps(emb, hidden, {0, v - 1}, /*clip=*/false);
    const ember::query::Neighbours<T> nn(emb.weight());
    const auto best = nn.nearest(ember::TokenId{0}, 5);
    CHECK(static_cast<ember::Index>(best.size()) == std::min<ember::Index>(5, v - 1));
    for (const auto& r : best) CHECK(std::isfinite(r.score));
  }
  // A zero table (every row zero-norm): cosines are 0, never NaN.
  const ember::query::Neighbours<T> zeros(ember::RowMatrix<T>::Zero(3, 1));
  for (const auto& r : zeros.nearest(ember::TokenId{1}, 2)) CHECK(r.score == T(0));
}

TEST_CASE("gradients whose square overflows are tamed by clipping before Adam",
          "[reliability][numerics]") {
  // |g| = 1e30 in float: g * g overflows, so Adam's second moment would become inf and then NaN
  // (as in torch.optim). The norm of ClipGroup is computed in double and scales g down first.
  ember::Embedding<float> emb(3, 2, /*seed=*/2);
  const std::vector<ember::TokenId> ids = {0, 2};
  const ember::RowMatrix<float> huge = ember::RowMatrix<float>::Constant(2, 2, 1e30f);
  ember::SparseRowGrad<float> g;
  emb.backward(ids, huge, g);
  REQUIRE(ember::all_finite(g));
  ember::ClipGroup<float> group;
  group.add(g);
  CHECK(group.clip(1.0) > 1e30);
  ember::optim::Adam<float> adam({.lr = 1e-2, .check_finite = true});
  for (int i = 0; i < 5; ++i) adam.step(emb, g);
  CHECK(emb.weight().allFinite());
}

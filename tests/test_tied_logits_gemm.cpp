// Tests of the tied-logits GEMMs against plain triple loops, on contiguous and block arguments
// (whichever GEMM backend the build uses: Eigen's, or a BLAS with ember::blas).
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <ember/tied_logits.hpp>

#include "support/inputs.hpp"

using ember::Index;
using ember::RowMatrix;

TEMPLATE_TEST_CASE("logits and logits_backward match plain loops", "[tied_logits][kernels]", float,
                   double) {
  using T = TestType;
  const Index vocab = 37;
  const Index d = 19;
  const Index n = GENERATE(1, 5, 70);
  const RowMatrix<T> table = ember_test::random_table<T>(vocab, d, 1);
  const RowMatrix<T> big_hidden = ember_test::random_table<T>(n + 2, d + 3, 2);
  const auto hidden = big_hidden.block(1, 2, n, d);  // a non-contiguous view
  const RowMatrix<T> grad_logits = ember_test::random_table<T>(n, vocab, 3);
  const T tol = std::is_same_v<T, float> ? T(1e-4) : T(1e-10);

  const RowMatrix<T> out = ember::logits(table, hidden);
  RowMatrix<T> grad_hidden(n, d);
  RowMatrix<T> grad_weight = RowMatrix<T>::Ones(vocab, d);
  ember::logits_backward(table, hidden, grad_logits, grad_hidden, grad_weight);

  for (Index i = 0; i < n; ++i) {
    for (Index v = 0; v < vocab; ++v) {
      T acc = 0;
      for (Index c = 0; c < d; ++c) acc += hidden(i, c) * table(v, c);
      CHECK_THAT(out(i, v), Catch::Matchers::WithinAbs(acc, tol));
    }
    for (Index c = 0; c < d; ++c) {
      T acc = 0;
      for (Index v = 0; v < vocab; ++v) acc += grad_logits(i, v) * table(v, c);
      CHECK_THAT(grad_hidden(i, c), Catch::Matchers::WithinAbs(acc, tol));
    }
  }
  for (Index v = 0; v < vocab; ++v) {
    for (Index c = 0; c < d; ++c) {
      T acc = 1;  // accumulated onto the ones it held
      for (Index i = 0; i < n; ++i) acc += grad_logits(i, v) * hidden(i, c);
      CHECK_THAT(grad_weight(v, c), Catch::Matchers::WithinAbs(acc, tol * T(10)));
    }
  }
}

// ember's results must be bit-identical for any thread count. Built with OpenMP (the `ci` preset
// has EMBER_OPENMP=ON) this runs forward, the fused input pipeline and backward at 1, 2 and 4
// threads on sizes above the threading threshold and compares the bits; without OpenMP the
// kernels are serial and the test only checks that they run.
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <vector>

#include <ember/config.hpp>
#include <ember/embedding.hpp>
#include <ember/input_embedding.hpp>
#include <ember/positional.hpp>

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"
#include "support/threads.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

namespace {

struct Results {
  RowMatrix<float> forward;
  RowMatrix<float> fused;
  std::vector<TokenId> grad_rows;
  RowMatrix<float> grad_values;
};

Results run_all(int threads) {
  ember_test::set_threads(threads);
  const Index vocab = 3000;
  const Index d = 96;
  const Index seq_len = 128;
  const Index n = 16 * seq_len;  // n·d = 196608, well above detail::kParallelMinWork
  const ember::Embedding<float> emb(vocab, d, 7);
  const ember::SinusoidalEncoding<float> pe(seq_len, d);
  const auto ids = ember_test::random_ids(n, vocab, 3, 700);  // many repeats per row
  Results r;
  r.forward = emb.forward(ids);
  r.fused = ember::embed_with_positions(emb, pe, ids, seq_len);
  const RowMatrix<float> grad_out = ember_test::random_table<float>(n, d, 9);
  ember::SparseRowGrad<float> grad;
  emb.backward(ids, grad_out, grad);
  const auto more = ember_test::random_ids(n, vocab, 4);  // new rows interleave with stored ones
  grad.accumulate(more, grad_out, 0.25f, vocab, {.scale_grad_by_freq = true, .skip_row = 5});
  r.grad_rows.assign(grad.rows().begin(), grad.rows().end());
  r.grad_values = grad.values();
  return r;
}

}  // namespace

TEST_CASE("forward, fused positions and backward are bit-identical at 1, 2 and 4 threads",
          "[threading]") {
#if EMBER_HAS_OPENMP
  const int saved = omp_get_max_threads();
#endif
  const Results one = run_all(1);
  for (const int threads : {2, 4}) {
    INFO("threads = " << threads);
    const Results many = run_all(threads);
    CHECK(ember_test::same_bits(one.forward, many.forward));
    CHECK(ember_test::same_bits(one.fused, many.fused));
    CHECK(one.grad_rows == many.grad_rows);
    CHECK(ember_test::same_bits(one.grad_values, many.grad_values));
  }
#if EMBER_HAS_OPENMP
  ember_test::set_threads(saved);
  CHECK(ember::detail::kernel_threads(ember::detail::kParallelMinWork) == saved);
#endif
}

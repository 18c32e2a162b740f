// Quickstart: scaled lookup, sinusoidal positions and tied logits on the worked example of
// "Attention Is All You Need" §3.4 (V = 5, d_model = 4, ids [2, 0, 3]).
// SPDX-License-Identifier: MIT
#include <iomanip>
#include <iostream>
#include <vector>

#include <ember/embedding.hpp>
#include <ember/positional.hpp>

namespace {
void print(const char* title, const ember::RowMatrix<float>& m) {
  std::cout << title << " (" << m.rows() << " x " << m.cols() << ")\n";
  for (ember::Index r = 0; r < m.rows(); ++r) {
    for (ember::Index c = 0; c < m.cols(); ++c) std::cout << std::setw(9) << m(r, c);
    std::cout << '\n';
  }
}
}  // namespace

int main() {
  std::cout << std::fixed << std::setprecision(4);

  // clang-format off
  // [quickstart-core]
  ember::RowMatrix<float> table(5, 4);
  table <<  0.02f, -0.01f,  0.03f,  0.01f,
           -0.04f,  0.05f, -0.02f,  0.03f,
            0.01f,  0.06f, -0.03f, -0.05f,
            0.03f, -0.02f,  0.04f,  0.02f,
           -0.01f,  0.03f,  0.01f, -0.04f;
  ember::Embedding<float> emb(table);              // owns an unscaled 5 x 4 table
  std::vector<ember::TokenId> ids{2, 0, 3};
  ember::RowMatrix<float> x = emb.forward(ids);    // rows of the table times sqrt(4) = 2

  ember::SinusoidalEncoding<float> pe(/*max_len=*/16, /*d_model=*/4);
  pe.add_to(x, /*seq_len=*/3);                     // x.row(t) += PE(t)
  // [quickstart-core]
  // clang-format on

  std::cout << "vocab_size " << emb.vocab_size() << ", d_model " << emb.d_model() << ", scale "
            << emb.scale() << "\n";
  print("embedded and scaled, ids [2, 0, 3]", emb.forward(ids));
  print("PE rows for positions 0..2", pe.table().topRows(3));
  print("scaled embedding + PE", x);

  // A random table: N(0, 1/d) from seed 7, so each scaled lookup row has unit variance.
  ember::Embedding<float> big(1000, 64, /*seed=*/7);
  std::vector<ember::TokenId> tokens{42, 7, 999};
  ember::RowMatrix<float> h = big.forward(tokens);
  ember::RowMatrix<float> logits = big.logits(h);  // h * W^T, tied to the same table
  std::cout << "lookup " << h.rows() << " x " << h.cols() << ", logits " << logits.rows() << " x "
            << logits.cols() << "\n";
  ember::Index best = 0;
  logits.row(0).maxCoeff(&best);
  // A row scores highest against itself: tied weights map a token back to its own id.
  // (2 decimals here: a GEMM's summation order, and so its last bits, follow the SIMD width.)
  std::cout << "argmax of the logits of row 0 (token 42): " << best << ", logit "
            << std::setprecision(2) << logits(0, best) << "\n";
  return 0;
}

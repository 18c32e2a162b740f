// One table, many storage formats: the same lookup over float, half, int8 and a view of int8 rows
// in memory ember does not own, a model's own lookup scale, and bags over a half table.
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <vector>

#include <ember/bag.hpp>
#include <ember/embedding.hpp>
#include <ember/quantized.hpp>
#include <ember/reduced.hpp>

int main() {
  ember::RowMatrix<float> w(4, 4);
  w << 0.10f, -0.20f, 0.30f, 0.05f,  //
      -0.40f, 0.50f, 0.00f, 0.25f,   //
      0.70f, -0.10f, -0.60f, 0.20f,  //
      0.15f, 0.35f, -0.45f, -0.05f;
  const std::vector<int> ids{2, 0};

  const ember::Embedding<float> f32(w);                  // scale √4 = 2
  const auto f16 = ember::HalfEmbedding::from_float(w);  // 2 bytes per value
  const ember::QuantizedEmbedding int8(w);               // d + 8 bytes per row (FBGEMM)
  const ember::QuantizedEmbeddingView view(int8.bytes().data(), 4, 4);  // zero copy
  const ember::Embedding<float> llama(w, ember::LookupScale::none());   // LLaMA: no scale

  const auto show = [](const char* name, const ember::RowMatrix<float>& x) {
    std::printf("%-6s", name);
    for (ember::Index c = 0; c < x.cols(); ++c) std::printf(" %8.5f", x(0, c));
    std::printf("\n");
  };
  show("f32", f32.forward(ids));
  show("f16", f16.forward(ids));
  show("int8", int8.forward(ids));
  show("view", view.forward(ids));
  show("llama", llama.forward(ids));
  std::printf("bytes per row: f32 %ld, f16 %ld, int8 %ld\n", static_cast<long>(4 * sizeof(float)),
              static_cast<long>(f16.row_bytes()), static_cast<long>(int8.row_bytes()));

  // A bag pools the decoded rows of any table; here the mean of rows 2 and 0 of the half table.
  const ember::EmbeddingBag<ember::HalfEmbedding> bag(f16, ember::BagMode::mean);
  const std::vector<int> offsets{0};
  show("bag", bag.forward(ids, offsets));
  return 0;
}

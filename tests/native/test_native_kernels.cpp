// Kernel tests built with -march=native (binary ember_native_tests): the F16C half conversion of
// codec/reduced.hpp exists only when the target has it, which the portable ember_tests build does
// not assume, and the int8 decode is vectorised with FMA available only there. Both are checked
// as the benchmarks run them.
// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/bag.hpp"
#include "ember/codec/int8_rowwise.hpp"
#include "ember/codec/reduced.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/quantized.hpp"
#include "ember/reduced.hpp"
#include "support/bag_reference.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;

TEST_CASE("the int8 decode built for this machine gives the portable decode's bits",
          "[quantized][kernels][native]") {
  // At -march=native the compiler vectorises the decode loop and could fuse its multiply-add;
  // the codec keeps the product rounded before the bias is added, so every build gives the same
  // bits: q · (scale·s) rounded, plus bias·s.
  for (const Index d : {1, 7, 8, 9, 15, 16, 17, 24, 31, 64, 100, 128, 131, 768}) {
    RowMatrix<float> t = ember_test::random_table<float>(6, d, static_cast<std::uint64_t>(d));
    t.row(2) *= 1000.0f;
    t.row(3).setConstant(0.25f);  // scale 0
    const ember::QuantizedEmbedding q(t);
    using Codec = ember::codec::Int8Rowwise;
    for (const float s : {1.0f, std::sqrt(static_cast<float>(d)), -0.5f}) {
      for (Index r = 0; r < 6; ++r) {
        const std::uint8_t* row = q.bytes().data() + r * q.row_bytes();
        std::vector<float> fast(static_cast<std::size_t>(d));
        Codec::decode_row(row, d, s, fast.data());
        INFO("d = " << d << ", row " << r << ", s = " << s);
        volatile float a = q.row_scale(r) * s;  // volatile: no contraction in the reference
        volatile float b = q.row_bias(r) * s;
        for (Index c = 0; c < d; ++c) {
          volatile float product = static_cast<float>(row[c]) * a;
          const float v = product + b;
          CHECK(std::memcmp(&fast[static_cast<std::size_t>(c)], &v, sizeof v) == 0);
        }
      }
    }
    // the whole lookup, through the prefetching gather, decodes the same way
    const auto ids = ember_test::random_ids<int>(40, 6, 3);
    const RowMatrix<float> x = q.forward(ids);
    for (Index i = 0; i < 40; ++i) {
      const Index r = ids[static_cast<std::size_t>(i)];
      std::vector<float> row(static_cast<std::size_t>(d));
      Codec::decode_row(q.bytes().data() + r * q.row_bytes(), d, q.scale(), row.data());
      CHECK(std::memcmp(x.row(i).data(), row.data(), row.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("the half conversion equals Eigen's element conversion bit for bit",
          "[reduced][kernels][native]") {
  for (const Index d : {1, 7, 8, 15, 16, 17, 33, 128, 769}) {
    const RowMatrix<Eigen::half> t =
        ember_test::random_table<float>(1, d, static_cast<std::uint64_t>(d)).cast<Eigen::half>();
    std::vector<float> fast(static_cast<std::size_t>(d));
    ember::codec::Reduced<Eigen::half>::decode_row(t.data(), d, 3.0f, fast.data());
    for (Index c = 0; c < d; ++c) {
      const float ref = static_cast<float>(t(0, c)) * 3.0f;
      CHECK(std::memcmp(&fast[static_cast<std::size_t>(c)], &ref, sizeof ref) == 0);
    }
  }
}

TEST_CASE("the prefetch lead is a number of bytes, clamped to 2..64 rows", "[kernels][native]") {
  using ember::detail::prefetch_distance;
  CHECK(prefetch_distance(1) == 64);
  CHECK(prefetch_distance(1 << 20) == 2);
  // smaller rows get more rows of lead, about the same bytes
  CHECK(prefetch_distance(136) > prefetch_distance(256));
  CHECK(prefetch_distance(256) > prefetch_distance(512));
  CHECK(prefetch_distance(256) * 256 == prefetch_distance(512) * 512);
}

TEST_CASE("the bag backward built for this machine gives the materialised-rows reference's bits",
          "[bag][kernels][native]") {
  // With FMA available the gathered coef · grad_out product must still be rounded on its own
  // before the sum, as a materialised row is: no contraction into the accumulation.
  for (const bool mean : {false, true}) {
    const Index d = 64;
    ember::EmbeddingBag<float> bag(40, d, mean ? ember::BagMode::mean : ember::BagMode::sum);
    bag.embedding().set_padding_idx(3);
    const auto c = ember_test::make_bag_grad_case<float>(48, 12, 40, d, 3, 17);
    ember::BagOptions<float> opt;
    if (!mean) opt.per_sample_weights = c.weights;
    ember::SparseRowGrad<float> grad;
    ember::SparseRowGrad<float> expected;
    for (int call = 0; call < 2; ++call) {
      bag.backward(c.ids, c.offsets, c.grad_out, grad, opt);
      ember_test::bag_backward_reference<float>(bag, c.ids, c.bounds, c.grad_out, expected,
                                                opt.per_sample_weights);
    }
    REQUIRE(grad.size() == expected.size());
    CHECK(ember_test::same_bits(grad.values(), expected.values()));
  }
}

TEST_CASE("the register-tiled bag sum built for this machine adds the reference's terms in order",
          "[bag][kernels][native]") {
  for (const Index d : {16, 64, 131, 768}) {
    for (const bool mean : {false, true}) {
      const auto mode = mean ? ember::BagMode::mean : ember::BagMode::sum;
      ember::EmbeddingBag<float> bag(
          ember::Embedding<float>(ember_test::random_table<float>(30, d, 5)), mode);
      const auto c = ember_test::make_bag_grad_case<float>(20, 10, 30, d, -1, 23);
      const RowMatrix<float> out = bag.forward(c.ids, c.offsets);
      CHECK(
          ember_test::same_bits(out, ember_test::bag_reference<float>(
                                         bag.embedding().weight(), c.ids, c.bounds, mean ? 1 : 0)));
    }
  }
}

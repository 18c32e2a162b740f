// Tests of the gather kernel (detail/gather.hpp) against its plain reference loop, for every
// codec and every combination of what a lookup adds.
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <ember/codec/int8_rowwise.hpp>
#include <ember/codec/plain.hpp>
#include <ember/codec/reduced.hpp>
#include <ember/config.hpp>
#include <ember/detail/gather.hpp>

#include "support/embedding_reference.hpp"
#include "support/gather_reference.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"
#include "support/threads.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
namespace detail = ember::detail;

namespace {

// Whether this machine can run the AVX row kernels (compiled with target("avx") on x86 whatever
// the build's -m flags; the public entry points only use them when the build targets AVX).
bool avx_rows_runnable() {
#if EMBER_DETAIL_HAVE_AVX_ROWS
  return __builtin_cpu_supports("avx") != 0;
#else
  return false;
#endif
}

bool avx512_rows_runnable() {
#if EMBER_DETAIL_HAVE_AVX_ROWS
  return __builtin_cpu_supports("avx512f") != 0;
#else
  return false;
#endif
}

}  // namespace

TEMPLATE_TEST_CASE("gather over a plain table matches its plain reference", "[embedding][kernels]",
                   float, double) {
  using T = TestType;
  const Index vocab = 97;
  const Index d = GENERATE(1, 7, 64);
  const Index n = GENERATE(0, 1, 3, 600);
  const RowMatrix<T> table = RowMatrix<T>::Random(vocab, d);
  const auto ids = ember_test::random_ids(n, vocab, 11, n > 3 ? 10 : 0);
  RowMatrix<T> fast(n, d);
  RowMatrix<T> plain(n, d);
  const std::span<const TokenId> span(ids);
  detail::gather<T>(ember_test::plain_rows(table), span, T(1.5), nullptr,
                    detail::mutable_table(fast));
  ember_test::gather_reference<T>(ember_test::plain_rows(table), span, T(1.5), nullptr,
                                  detail::mutable_table(plain));
  CHECK(fast == plain);  // one rounding per element in both
}

TEMPLATE_TEST_CASE(
    "gather with positions matches its plain reference, positions wrapping per "
    "sequence",
    "[input_embedding][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 50;
  const Index d = 24;
  const Index seq_len = GENERATE(1, 5, 64);
  const Index offset = GENERATE(0, 3);
  const Index batches = GENERATE(0, 1, 13);
  const Index n = batches * seq_len;
  const RowMatrix<T> table = RowMatrix<T>::Random(vocab, d);
  const RowMatrix<T> pe = RowMatrix<T>::Random(offset + seq_len + 2, d);
  const auto ids = ember_test::random_ids(n, vocab, 5);
  RowMatrix<T> fast(n, d);
  RowMatrix<T> plain(n, d);
  const std::span<const TokenId> span(ids);
  detail::RowAddends<T> add;
  add.positions = detail::const_table(pe);
  add.seq_len = seq_len;
  add.offset = offset;
  detail::gather<T>(ember_test::plain_rows(table), span, T(3), add, detail::mutable_table(fast));
  ember_test::gather_reference<T>(ember_test::plain_rows(table), span, T(3), add,
                                  detail::mutable_table(plain));
  // The product is rounded before the add in both (the reference stores it first).
  CHECK(ember_test::same_bits(fast, plain));
}

TEST_CASE("gather kernels state their preconditions", "[embedding][kernels]") {
  const RowMatrix<float> table = RowMatrix<float>::Ones(4, 2);
  RowMatrix<float> out(1, 2);
  const std::vector<TokenId> bad{4};
  CHECK_THROWS_AS(
      detail::gather<float>(ember_test::plain_rows(table), std::span<const TokenId>(bad), 1.0f,
                            nullptr, detail::mutable_table(out)),
      std::logic_error);
  RowMatrix<float> wrong(2, 2);
  const std::vector<TokenId> ok{1};
  CHECK_THROWS_AS(detail::gather<float>(ember_test::plain_rows(table), std::span<const TokenId>(ok),
                                        1.0f, nullptr, detail::mutable_table(wrong)),
                  std::logic_error);
}

TEMPLATE_TEST_CASE(
    "every row path of the fused lookup (plain, AVX and AVX-512, cached and streaming) gives the "
    "bits of the unfused two-pass computation, into strided and misaligned outputs",
    "[input_embedding][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 61;
  const Index d = GENERATE(1, 3, 8, 13, 33, 64, 101);
  const Index offset = GENERATE(0, 2);
  const Index n = GENERATE(4, 36, 1024);  // 1024 x 64 is above kParallelMinWork: threads split it
  const Index col0 = GENERATE(0, 1, 3);   // first column of the output block: rows off alignment
  const int threads = GENERATE(1, 2);
  CAPTURE(d, offset, n, col0, threads);
  const Index seq_len = 4;
  const T scale = std::sqrt(T(d) + T(0.5));  // inexact, so w·s has a rounding to lose
  const RowMatrix<T> table = ember_test::random_table<T>(vocab, d, 21);
  const RowMatrix<T> pe = ember_test::random_table<T>(offset + seq_len + 1, d, 22);
  const auto ids = ember_test::random_ids(n, vocab, 23);
  const std::span<const TokenId> span(ids);
  const RowMatrix<T> expected =
      ember_test::embed_positions_loops(table, span, scale, pe, seq_len, offset);
  ember_test::set_threads(threads);

  const auto run = [&](auto rows, bool exact) {
    // Outer stride d + 5 and a first column of col0: row starts fall on every alignment.
    RowMatrix<T> big = RowMatrix<T>::Constant(n + 2, d + 5, T(-9));
    auto block = big.block(1, col0, n, d);
    detail::scaled_add_rows(rows, detail::const_table(table), span, scale, detail::const_table(pe),
                            seq_len, offset, detail::mutable_table(block), /*ahead=*/2);
    if (exact) {
      CHECK(ember_test::same_bits(block, expected));
    } else {
      CHECK(block.isApprox(expected, T(8) * Eigen::NumTraits<T>::epsilon()));
    }
    block.setConstant(T(-9));
    CHECK((big.array() == T(-9)).all());  // nothing written outside the block
  };
  // The plain Eigen path is exact wherever the compiler does not contract w·s + p into an FMA:
  // on x86 FMA implies AVX, and AVX builds dispatch to the AVX rows instead.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__FMA__)
  constexpr bool plain_exact = true;
#else
  constexpr bool plain_exact = false;
#endif
  run(detail::PlainRows{}, plain_exact);
#if EMBER_DETAIL_HAVE_AVX_ROWS
  // A build that targets AVX (or AVX-512) runs on a machine that has it; other builds run the
  // vector paths where the machine has them.
#if defined(__AVX__)
  REQUIRE(avx_rows_runnable());
#endif
#if defined(__AVX512F__)
  REQUIRE(avx512_rows_runnable());
#endif
  if (avx_rows_runnable()) {
    run(detail::AvxRows{}, true);
    run(detail::AvxStreamRows{}, true);
  }
  if (avx512_rows_runnable()) {
    run(detail::Avx512Rows{}, true);
    run(detail::Avx512StreamRows{}, true);
  }
#endif
  ember_test::set_threads(1);
}

TEMPLATE_TEST_CASE(
    "the fused lookup gives the same bits below and above the streaming threshold, at 1 and 2 "
    "threads",
    "[input_embedding][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 200;
  const Index d = 129;  // odd: every other row starts off a 32-byte boundary
  const Index seq_len = 8;
  const auto bytes_per_row = d * static_cast<Index>(sizeof(T));
  const Index above = (detail::kStreamMinBytes / bytes_per_row / seq_len + 1) * seq_len;
  const int size = GENERATE(0, 1, 2);  // one sequence, just below, just above the threshold
  const Index n = size == 0 ? seq_len : size == 1 ? above - seq_len : above;
  const int threads = GENERATE(1, 2);
  CAPTURE(n, threads, n * bytes_per_row >= detail::kStreamMinBytes);
  const T scale = std::sqrt(T(d));
  const RowMatrix<T> table = ember_test::random_table<T>(vocab, d, 31);
  const RowMatrix<T> pe = ember_test::random_table<T>(seq_len + 3, d, 32);
  const auto ids = ember_test::random_ids(n, vocab, 33);
  const std::span<const TokenId> span(ids);
  ember_test::set_threads(threads);
  RowMatrix<T> big = RowMatrix<T>::Constant(n, d + 1, T(5));  // outer stride d + 1
  auto out = big.leftCols(d);
  detail::RowAddends<T> add;
  add.positions = detail::const_table(pe);
  add.seq_len = seq_len;
  add.offset = 3;
  detail::gather<T>(ember_test::plain_rows(table), span, scale, add, detail::mutable_table(out));
  ember_test::set_threads(1);
  const RowMatrix<T> expected =
      ember_test::embed_positions_loops(table, span, scale, pe, seq_len, 3);
#if defined(__x86_64__) || defined(__i386__)
  CHECK(ember_test::same_bits(out, expected));
#else
  CHECK(out.isApprox(expected, T(8) * Eigen::NumTraits<T>::epsilon()));
#endif
  CHECK((big.col(d).array() == T(5)).all());
}

namespace {

// Gathers with every combination of addends (none, positions, segments with and without ids,
// a dropout mask) and compares the kernel with its reference, bit for bit.
template <class O, class Codec>
void check_all_addends(const detail::CodecRows<Codec>& rows, const std::vector<TokenId>& ids,
                       float scale) {
  using V = typename Codec::Value;
  const auto n = static_cast<Index>(ids.size());
  const Index d = rows.d;
  const Index seq_len = 4;
  const RowMatrix<V> pe = ember_test::random_table<V>(seq_len + 2, d, 41);
  const RowMatrix<V> seg = ember_test::random_table<V>(3, d, 42);
  std::vector<TokenId> seg_ids(ids.size());
  for (std::size_t i = 0; i < seg_ids.size(); ++i) seg_ids[i] = static_cast<TokenId>(i % 3);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(n * d));
  for (std::size_t e = 0; e < keep.size(); ++e) keep[e] = (e * 7 + 3) % 5 != 0 ? 1 : 0;
  for (int mask = 0; mask < 16; ++mask) {
    detail::RowAddends<V> add;
    if ((mask & 1) != 0) {
      add.positions = detail::const_table(pe);
      add.seq_len = seq_len;
      add.offset = 1;
    }
    if ((mask & 2) != 0) add.segments = detail::const_table(seg);
    if ((mask & 6) == 6) add.segment_ids = seg_ids;
    if ((mask & 8) != 0) {
      add.keep = keep.data();
      add.keep_scale = V(1.25);
    }
    RowMatrix<O> fast(n, d);
    RowMatrix<O> plain(n, d);
    detail::gather<O>(rows, std::span<const TokenId>(ids), V(scale), add,
                      detail::mutable_table(fast));
    ember_test::gather_reference<O>(rows, std::span<const TokenId>(ids), V(scale), add,
                                    detail::mutable_table(plain));
    CAPTURE(mask, d, n);
    CHECK(std::memcmp(fast.data(), plain.data(), static_cast<std::size_t>(n * d) * sizeof(O)) == 0);
  }
}

}  // namespace

TEST_CASE("gather gives its reference's bits for every codec and every addend combination",
          "[embedding][kernels]") {
  const Index d = GENERATE(1, 9, 64, 131);
  const Index n = GENERATE(4, 256);  // 256 x 131 is above kParallelMinWork
  const int threads = GENERATE(1, 2);
  ember_test::set_threads(threads);
  const RowMatrix<float> f = ember_test::random_table<float>(23, d, 43);
  const auto ids = ember_test::random_ids(n, 23, 44);
  const float scale = std::sqrt(static_cast<float>(d) + 0.5f);

  check_all_addends<float>(ember_test::plain_rows(f), ids, scale);
  const RowMatrix<double> g = f.cast<double>();
  check_all_addends<double>(ember_test::plain_rows(g), ids, scale);

  const RowMatrix<Eigen::half> h = f.cast<Eigen::half>();
  const detail::CodecRows<ember::codec::Reduced<Eigen::half>> half_rows{
      {}, h.data(), h.rows(), d, h.cols()};
  check_all_addends<float>(half_rows, ids, scale);
  check_all_addends<Eigen::half>(half_rows, ids, scale);  // rounded to the storage type

  const RowMatrix<Eigen::bfloat16> b = f.cast<Eigen::bfloat16>();
  const detail::CodecRows<ember::codec::Reduced<Eigen::bfloat16>> bf16_rows{
      {}, b.data(), b.rows(), d, b.cols()};
  check_all_addends<float>(bf16_rows, ids, scale);

  using Int8 = ember::codec::Int8Rowwise;
  RowMatrix<std::uint8_t> q(f.rows(), Int8::units_per_row(d));
  for (Index r = 0; r < f.rows(); ++r) Int8::encode_row(f.row(r).data(), d, q.row(r).data());
  const detail::CodecRows<Int8> int8_rows{{}, q.data(), q.rows(), d, q.cols()};
  check_all_addends<float>(int8_rows, ids, scale);
  ember_test::set_threads(1);
}

// Concurrency: const members of Embedding (forward, logits), the fused pipeline, the queries of
// Neighbours and the loaders are called from 8 threads at once on shared objects and must give
// the single-thread bits; backward into per-thread SparseRowGrad objects merged in a fixed order
// must give the same bits as one thread. Built alone as ember_concurrency_tests for the
// ThreadSanitizer preset (tsan), and as part of ember_tests everywhere else.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/input_embedding.hpp"
#include "ember/io/npy.hpp"
#include "ember/positional.hpp"
#include "ember/query/similarity.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/tied_logits.hpp"
#include "support/io_files.hpp"

namespace {

constexpr int kThreads = 8;

/// Runs body(t) on kThreads threads started together; returns when all have finished.
void hammer(const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      body(t);
    });
  }
  for (auto& th : threads) th.join();
}

std::vector<std::int64_t> batch_ids(int batch, std::size_t n, ember::Index vocab) {
  std::vector<std::int64_t> ids(n);
  std::uint64_t x = UINT64_C(0x9e3779b97f4a7c15) * static_cast<std::uint64_t>(batch + 1);
  for (auto& id : ids) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    id = static_cast<std::int64_t>((x * UINT64_C(0x2545f4914f6cdd1d)) %
                                   static_cast<std::uint64_t>(vocab));
  }
  return ids;
}

/// Gradient rows for a batch: with `exact`, small multiples of 1/8 so every sum is exact and the
/// result cannot depend on the order of additions.
ember::RowMatrix<float> batch_grad(int batch, ember::Index n, ember::Index d, bool exact) {
  ember::RowMatrix<float> g(n, d);
  for (ember::Index i = 0; i < g.size(); ++i) {
    const auto k = static_cast<float>((i * 7 + batch * 13) % 17) - 8.0f;
    g.data()[i] = exact ? k / 8.0f : k * 0.1f + 0.01f * static_cast<float>(batch);
  }
  return g;
}

}  // namespace

TEST_CASE("forward, logits, the fused pipeline and queries are safe on one const table",
          "[concurrency]") {
  constexpr ember::Index V = 96, d = 16, n = 24, seq_len = 8;
  const ember::Embedding<float> emb(V, d, /*seed=*/7);
  const ember::SinusoidalEncoding<float> pe(32, d);
  const ember::query::Neighbours<float> nn(emb.weight());
  const auto ids = batch_ids(0, static_cast<std::size_t>(n), V);
  ember::RowMatrix<float> hidden(n, d);
  for (ember::Index i = 0; i < hidden.size(); ++i)
    hidden.data()[i] = static_cast<float>(i % 11) * 0.1f;

  // Single-thread answers.
  const ember::RowMatrix<float> fwd = emb.forward(ids);
  const ember::RowMatrix<float> lg = emb.logits(hidden);
  const ember::RowMatrix<float> fused = ember::embed_with_positions(emb, pe, ids, seq_len);
  const auto near = nn.nearest(ember::TokenId{5}, 10);
  const auto batch = nn.nearest_batch(hidden, 4);
  const std::vector<ember::TokenId> pos = {1, 2}, neg = {3};
  const auto analogy = nn.most_similar(pos, neg, 5);
  const auto cosmul = nn.most_similar_cosmul(pos, neg, 5);

  std::atomic<int> mismatches{0};
  hammer([&](int t) {
    ember::RowMatrix<float> out(n, d);
    ember::RowMatrix<float> lg_out(n, V);
    for (int it = 0; it < 150; ++it) {
      if (emb.forward(ids) != fwd) ++mismatches;
      emb.forward(ids, out);
      if (out != fwd) ++mismatches;
      if (emb.logits(hidden) != lg) ++mismatches;
      ember::logits(emb.weight(), hidden, lg_out);
      if (lg_out != lg) ++mismatches;
      if (ember::embed_with_positions(emb, pe, ids, seq_len) != fused) ++mismatches;
      if (nn.nearest(ember::TokenId{5}, 10) != near) ++mismatches;
      if (nn.nearest_batch(hidden, 4) != batch) ++mismatches;
      if (nn.most_similar(pos, neg, 5) != analogy) ++mismatches;
      if (nn.most_similar_cosmul(pos, neg, 5) != cosmul) ++mismatches;
      if (nn.similarity(t, (t + it) % V) != nn.similarity((t + it) % V, t)) ++mismatches;
      // Errors thrown concurrently are independent too.
      const std::vector<std::int64_t> bad = {0, V + t};
      try {
        (void)emb.forward(bad);
        ++mismatches;
      } catch (const ember::IndexError& e) {
        if (e.value() != V + t || e.position() != 1) ++mismatches;
      }
    }
  });
  CHECK(mismatches.load() == 0);
}

TEST_CASE("per-thread backward + merge gives the bits of one thread", "[concurrency]") {
  constexpr ember::Index V = 200, d = 16, n = 64;  // d = 16: scale() = 4, exact
  constexpr int kBatches = 32;
  const ember::Embedding<float> emb(V, d, /*seed=*/3);
  for (const bool exact : {false, true}) {
    INFO((exact ? "dyadic gradients" : "arbitrary gradients"));
    std::vector<std::vector<std::int64_t>> ids;
    std::vector<ember::RowMatrix<float>> grads;
    for (int b = 0; b < kBatches; ++b) {
      ids.push_back(batch_ids(b, static_cast<std::size_t>(n), V));
      grads.push_back(batch_grad(b, n, d, exact));
    }
    // Thread t takes batches t, t + 8, ...; partial gradients are merged in thread order.
    auto partial = [&](int t, ember::SparseRowGrad<float>& g) {
      for (int b = t; b < kBatches; b += kThreads) {
        const auto k = static_cast<std::size_t>(b);
        emb.backward(ids[k], grads[k], g);
      }
    };
    std::vector<ember::SparseRowGrad<float>> per_thread(kThreads);
    hammer([&](int t) { partial(t, per_thread[static_cast<std::size_t>(t)]); });
    ember::SparseRowGrad<float> merged;
    for (const auto& g : per_thread) merged.merge(g);

    // The same partition and merge order on one thread: identical bits.
    ember::SparseRowGrad<float> serial_merged;
    for (int t = 0; t < kThreads; ++t) {
      ember::SparseRowGrad<float> g;
      partial(t, g);
      serial_merged.merge(g);
    }
    REQUIRE(merged.rows().size() == serial_merged.rows().size());
    CHECK(std::equal(merged.rows().begin(), merged.rows().end(), serial_merged.rows().begin()));
    CHECK(merged.values() == serial_merged.values());

    // One gradient accumulating every batch in order on one thread: the same bits when sums are
    // exact; otherwise equal to rounding (float addition is not associative; see
    // docs/reliability.md).
    ember::SparseRowGrad<float> single;
    for (std::size_t b = 0; b < ids.size(); ++b) emb.backward(ids[b], grads[b], single);
    if (exact) {
      CHECK(merged.to_dense() == single.to_dense());
    } else {
      CHECK(merged.to_dense().isApprox(single.to_dense(), 1e-5f));
    }
  }
}

TEST_CASE("loaders read one file from many threads at once", "[concurrency]") {
  ember_test::ScratchDir dir;
  ember::RowMatrix<float> table(40, 8);
  for (ember::Index i = 0; i < table.size(); ++i) table.data()[i] = static_cast<float>(i) / 3.0f;
  const std::string path = dir.file("t.npy");
  ember::io::save_npy(path, table);
  std::atomic<int> mismatches{0};
  hammer([&](int t) {
    for (int it = 0; it < 10; ++it) {
      if (ember::io::load_npy<float>(path) != table) ++mismatches;
      const auto mapped = ember::io::map_npy<float>(path);
      if (mapped.matrix() != table) ++mismatches;
      // Concurrent saves to distinct paths, then a read back.
      const std::string mine = dir.file("t" + std::to_string(t) + ".npy");
      ember::io::save_npy(mine, table);
      if (ember::io::load_npy<float>(mine) != table) ++mismatches;
    }
  });
  CHECK(mismatches.load() == 0);
}

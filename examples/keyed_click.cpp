// A click model on raw 64-bit keys: users and items arrive as hashed 64-bit ids from a stream far
// larger than the tables, so keyed tables admit them (users after two sightings), evict the least
// recently seen when full and re-initialise the rows they reuse. Three features (user, item,
// the user's recent items pooled by mean) over two KeyedTableBatchedBags tables feed a logistic
// head; each step maps the batch's keys, pools, and runs the backward fused with a row-wise
// Adagrad per table. Fails unless the held-out log loss ends below 0.9 x the constant's.
// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include <ember/keyed/keyed_bags.hpp>
#include <ember/optim.hpp>
#include <ember/random.hpp>

namespace {

using ember::Index;
using ember::RowMatrix;
constexpr Index kBatch = 128, kHistory = 4, kUsers = 1200, kItems = 1600;
constexpr int kSteps = 400, kReport = 100;

/// Hidden affinities of every user and item; a click's log-odds are the user's, the item's and
/// the mean of the recent items' affinities. Keys are the ids scrambled over all 64 bits.
struct World {
  ember::Random rng{5};
  std::vector<double> user, item;
  World() : user(kUsers), item(kItems) {
    for (auto& a : user) a = 1.5 * rng.normal();
    for (auto& a : item) a = 1.5 * rng.normal();
  }
  Index draw(Index n) {  // popular ids far more often
    const double u = rng.uniform();
    return static_cast<Index>(static_cast<double>(n) * u * u * u);
  }
  static std::uint64_t key(Index id, std::uint64_t kind) {
    return ember::detail::mix_key(static_cast<std::uint64_t>(id) ^ kind);
  }
  void batch(std::vector<std::uint64_t>& keys, std::vector<Index>& lengths,
             std::vector<double>& y) {
    std::vector<std::uint64_t> f[3];
    lengths.assign(3 * kBatch, 1);
    y.clear();
    for (Index b = 0; b < kBatch; ++b) {
      const Index u = draw(kUsers), i = draw(kItems);
      double logit = user[static_cast<std::size_t>(u)] + item[static_cast<std::size_t>(i)] - 0.5;
      f[0].push_back(key(u, 0x5EED));
      f[1].push_back(key(i, 0xF00D));
      for (Index k = 0; k < kHistory; ++k) {
        const Index seen = draw(kItems);
        f[2].push_back(key(seen, 0xF00D));
        logit += item[static_cast<std::size_t>(seen)] / kHistory;
      }
      lengths[static_cast<std::size_t>(2 * kBatch + b)] = kHistory;
      y.push_back(rng.uniform() < 1.0 / (1.0 + std::exp(-logit)) ? 1.0 : 0.0);
    }
    keys.clear();
    for (const auto& k : f) keys.insert(keys.end(), k.begin(), k.end());
  }
};

}  // namespace

int main() {
  using Adagrad = ember::optim::RowwiseAdagrad<double>;
  const ember::KeyedOptions users{.index = {.policy = ember::EvictionPolicy::lru, .min_count = 2},
                                  .seed = 1};
  const ember::KeyedOptions items{.index = {.policy = ember::EvictionPolicy::lru}, .seed = 2};
  ember::KeyedTableBatchedBags<double> model(
      {{.capacity = 800, .d_model = 8, .options = users},
       {.capacity = 1000, .d_model = 8, .options = items}},
      {{.table = 0}, {.table = 1}, {.table = 1, .mode = ember::BagMode::mean}});
  std::vector<Adagrad> opts(2, Adagrad({.lr = 0.3}));
  Eigen::VectorXd head = Eigen::VectorXd::Constant(model.width(), 0.1);
  double bias = 0.0;
  World world;
  std::vector<std::uint64_t> keys, test_keys;
  std::vector<Index> lengths, test_lengths;
  std::vector<double> y, test_y;
  world.batch(test_keys, test_lengths, test_y);  // held out
  double rate = 0.0;
  for (const double t : test_y) rate += t / kBatch;
  const auto loss = [&](const Eigen::VectorXd& logits, const std::vector<double>& labels) {
    double l = 0.0;
    for (Index i = 0; i < kBatch; ++i) {
      const double p = 1.0 / (1.0 + std::exp(-(logits[i] + bias)));
      l -= labels[static_cast<std::size_t>(i)] * std::log(p) +
           (1.0 - labels[static_cast<std::size_t>(i)]) * std::log(1.0 - p);
    }
    return l / kBatch;
  };
  const auto test_loss = [&] {
    const RowMatrix<double> pooled = model.forward_lengths(test_keys, test_lengths);
    return loss(pooled * head, test_y);
  };
  const double constant = -(rate * std::log(rate) + (1 - rate) * std::log(1 - rate));
  std::printf("%lld users and %lld items stream through tables of 800 and 1000 rows\n",
              static_cast<long long>(kUsers), static_cast<long long>(kItems));
  std::printf("held-out log loss of the best constant: %.4f\n", constant);
  for (int step = 1; step <= kSteps; ++step) {
    world.batch(keys, lengths, y);
    const ember::KeyedBatch batch = model.map_lengths(keys, lengths, step);
    RowMatrix<double> pooled(kBatch, model.width());
    model.forward_lengths(batch, lengths, pooled);
    const Eigen::VectorXd logits = pooled * head;
    Eigen::VectorXd g(kBatch);
    for (Index i = 0; i < kBatch; ++i)
      g[i] =
          (1.0 / (1.0 + std::exp(-(logits[i] + bias))) - y[static_cast<std::size_t>(i)]) / kBatch;
    const RowMatrix<double> grad_pooled = g * head.transpose();
    head -= 1.0 * (pooled.transpose() * g);
    bias -= 1.0 * g.sum();
    model.backward_step_lengths(batch, lengths, grad_pooled, std::span<Adagrad>(opts));
    if (step % kReport == 0) {
      std::printf(
          "step %3d  held-out log loss %.4f  resident %lld users, %lld items; this batch gave "
          "%lld keys a row, evicting %lld\n",
          step, test_loss(), static_cast<long long>(model.index(0).size()),
          static_cast<long long>(model.index(1).size()), static_cast<long long>(batch.inserted()),
          static_cast<long long>(batch.evicted().size()));
    }
  }
  const bool pass = test_loss() < 0.9 * constant;
  std::printf("rows reused after evictions: %lld of users, %lld of items -> %s\n",
              static_cast<long long>(model.eviction_log(0).size()),
              static_cast<long long>(model.eviction_log(1).size()), pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

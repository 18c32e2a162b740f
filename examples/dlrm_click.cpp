// A small DLRM-like click model trained on generated data with TableBatchedBags: six sparse
// features over five tables (the item table is read by two features: the item shown and the
// user's recent items, pooled by mean), their pooled rows concatenated and fed to a logistic
// head. Each step runs one table-batched forward and one backward fused with a row-wise Adagrad
// per table (no gradient of the tables is ever written out); the head is trained by plain SGD.
// Fails unless the held-out log loss ends below 0.85 x that of the best constant prediction.
// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include <ember/optim.hpp>
#include <ember/random.hpp>
#include <ember/table_batched_bags.hpp>

namespace {

using ember::BagFeature;
using ember::BagMode;
using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

constexpr Index kBatch = 256, kHistory = 8;
constexpr int kSteps = 300, kReport = 50;
constexpr double kThreshold = 0.85;

// Tables (rows, width) and the features reading them.
constexpr Index kUsers = 2000, kItems = 5000, kCategories = 40, kCountries = 30, kHours = 24;
const std::vector<BagFeature> kFeatures{
    {.table = 0},                         // user
    {.table = 1},                         // item shown
    {.table = 1, .mode = BagMode::mean},  // the user's recent items (shares the item table)
    {.table = 2},                         // item category
    {.table = 3},                         // country
    {.table = 4}};                        // hour of day

/// The generated world: every id of every table has a hidden affinity; a click's log-odds are
/// the sum of its features' affinities (the mean over the recent items) minus 1.
struct World {
  std::vector<std::vector<double>> affinity;  // per table, per id
  ember::Random rng{11};

  World() {
    for (const Index rows : {kUsers, kItems, kCategories, kCountries, kHours}) {
      std::vector<double> a(static_cast<std::size_t>(rows));
      for (auto& x : a) x = rng.normal();
      affinity.push_back(a);
    }
  }

  // A skewed id: popular users and items appear far more often (cube of a uniform).
  TokenId draw(Index rows) {
    const double u = rng.uniform();
    return static_cast<TokenId>(static_cast<double>(rows) * u * u * u) % rows;
  }

  // One batch in the table-batched layout (feature after feature, lengths per bag) and labels.
  void batch(std::vector<TokenId>& indices, std::vector<Index>& lengths, std::vector<double>& y) {
    std::vector<std::vector<TokenId>> per_feature(kFeatures.size());
    lengths.assign(kFeatures.size() * kBatch, 1);
    y.resize(kBatch);
    for (Index b = 0; b < kBatch; ++b) {
      const TokenId user = draw(kUsers);
      const TokenId item = draw(kItems);
      double logit = affinity[0][static_cast<std::size_t>(user)] +
                     affinity[1][static_cast<std::size_t>(item)] - 1.0;
      per_feature[0].push_back(user);
      per_feature[1].push_back(item);
      double history = 0.0;
      for (Index k = 0; k < kHistory; ++k) {
        const TokenId seen = draw(kItems);
        per_feature[2].push_back(seen);
        history += affinity[1][static_cast<std::size_t>(seen)] / kHistory;
      }
      lengths[static_cast<std::size_t>(2 * kBatch + b)] = kHistory;
      const TokenId category = item % kCategories;
      const auto country = static_cast<TokenId>(rng.uniform_index(kCountries));
      const auto hour = static_cast<TokenId>(rng.uniform_index(kHours));
      per_feature[3].push_back(category);
      per_feature[4].push_back(country);
      per_feature[5].push_back(hour);
      logit += history + affinity[2][static_cast<std::size_t>(category)] +
               affinity[3][static_cast<std::size_t>(country)] +
               affinity[4][static_cast<std::size_t>(hour)];
      y[static_cast<std::size_t>(b)] = rng.uniform() < 1.0 / (1.0 + std::exp(-logit)) ? 1.0 : 0.0;
    }
    indices.clear();
    for (const auto& ids : per_feature) indices.insert(indices.end(), ids.begin(), ids.end());
  }
};

/// Mean log loss of predictions p for labels y.
double log_loss(const std::vector<double>& p, const std::vector<double>& y) {
  double loss = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i)
    loss -= y[i] * std::log(p[i]) + (1.0 - y[i]) * std::log(1.0 - p[i]);
  return loss / static_cast<double>(p.size());
}

}  // namespace

int main() {
  std::vector<ember::Embedding<double>> tables;
  std::uint64_t seed = 1;
  for (const auto& [rows, width] : {std::pair<Index, Index>{kUsers, 8},
                                    {kItems, 8},
                                    {kCategories, 4},
                                    {kCountries, 4},
                                    {kHours, 4}}) {
    tables.emplace_back(rows, width, seed++);
  }
  ember::TableBatchedBags<double> tbe(std::move(tables), kFeatures);
  using Adagrad = ember::optim::RowwiseAdagrad<double>;
  std::vector<Adagrad> optimizers(static_cast<std::size_t>(tbe.num_tables()), Adagrad({.lr = 0.1}));
  Eigen::VectorXd head = Eigen::VectorXd::Zero(tbe.width());  // logistic head w, bias b
  double bias = 0.0;
  const double head_lr = 0.05;

  World world;
  std::vector<TokenId> indices;
  std::vector<Index> lengths;
  std::vector<double> y;
  // A fixed held-out set of 4 batches.
  std::vector<std::vector<TokenId>> test_indices(4);
  std::vector<std::vector<Index>> test_lengths(4);
  std::vector<double> test_y;
  for (int k = 0; k < 4; ++k) {
    world.batch(test_indices[static_cast<std::size_t>(k)],
                test_lengths[static_cast<std::size_t>(k)], y);
    test_y.insert(test_y.end(), y.begin(), y.end());
  }
  double rate = 0.0;
  for (const double label : test_y) rate += label / static_cast<double>(test_y.size());
  const double constant_loss = log_loss(std::vector<double>(test_y.size(), rate), test_y);
  const auto test_loss = [&] {
    std::vector<double> p;
    for (int k = 0; k < 4; ++k) {
      const RowMatrix<double> pooled = tbe.forward_lengths(
          test_indices[static_cast<std::size_t>(k)], test_lengths[static_cast<std::size_t>(k)]);
      const Eigen::VectorXd logits = pooled * head;
      for (Index i = 0; i < kBatch; ++i) p.push_back(1.0 / (1.0 + std::exp(-(logits[i] + bias))));
    }
    return log_loss(p, test_y);
  };

  std::printf("%lld features over %lld tables, %lld pooled columns, batch %lld\n",
              static_cast<long long>(tbe.num_features()), static_cast<long long>(tbe.num_tables()),
              static_cast<long long>(tbe.width()), static_cast<long long>(kBatch));
  std::printf("held-out log loss of the best constant prediction: %.4f\n", constant_loss);
  const double initial = test_loss();
  std::printf("step %3d  held-out log loss %.4f\n", 0, initial);
  RowMatrix<double> pooled(kBatch, tbe.width());
  for (int step = 1; step <= kSteps; ++step) {
    world.batch(indices, lengths, y);
    tbe.forward_lengths(indices, lengths, pooled);
    const Eigen::VectorXd logits = pooled * head;
    Eigen::VectorXd grad_logit(kBatch);  // d(mean log loss)/d(logit) = (p - y) / B
    for (Index i = 0; i < kBatch; ++i) {
      const double p = 1.0 / (1.0 + std::exp(-(logits[i] + bias)));
      grad_logit[i] = (p - y[static_cast<std::size_t>(i)]) / kBatch;
    }
    const RowMatrix<double> grad_pooled = grad_logit * head.transpose();
    head -= head_lr * 100.0 * (pooled.transpose() * grad_logit);
    bias -= head_lr * 100.0 * grad_logit.sum();
    tbe.backward_step_lengths(indices, lengths, grad_pooled, std::span<Adagrad>(optimizers));
    if (step % kReport == 0) std::printf("step %3d  held-out log loss %.4f\n", step, test_loss());
  }
  const double final_loss = test_loss();
  const bool pass = final_loss < kThreshold * constant_loss;
  std::printf("final held-out log loss %.4f vs constant %.4f (needs < %.2f x) -> %s\n", final_loss,
              constant_loss, kThreshold, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

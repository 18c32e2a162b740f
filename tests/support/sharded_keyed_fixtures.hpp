// What the MPI tests of the sharded keyed table share: the names they use and the one-process
// batch that maps every rank's batch in rank order (the reference a sharded step is compared with).
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

#include "ember/distributed/sharded_keyed_embedding.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::KeyedBatch;
using ember::KeyedEmbedding;
using ember::KeyedOptions;
using ember::RowMatrix;
using ember::TokenId;
using ember::distributed::key_owner;
using ember::distributed::ShardedKeyedEmbedding;
using ember_test::same_bits;
using Keys = std::vector<std::uint64_t>;

namespace ember_test {

/// The keys of ranks [0, ranks) at one step, one after the other, and where each rank's begin
/// (begin[r], with begin[ranks] = all.size()).
struct RankOrderBatch {
  Keys all;
  std::vector<Index> begin{0};
};

/// batch_of(r) for each rank r < ranks, in rank order.
template <class BatchOf>
[[nodiscard]] RankOrderBatch in_rank_order(int ranks, BatchOf&& batch_of) {
  RankOrderBatch b;
  for (int r = 0; r < ranks; ++r) {
    const Keys k = batch_of(r);
    b.all.insert(b.all.end(), k.begin(), k.end());
    b.begin.push_back(static_cast<Index>(b.all.size()));
  }
  return b;
}

}  // namespace ember_test

/// RowPartition: the rule that assigns the rows of a V-row table to P ranks as contiguous, balanced
/// ranges. It needs no MPI, so it can be used (and tested) anywhere.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::distributed {

template <class T>
class ShardedEmbedding;

/// Contiguous, balanced row ranges: rank r owns rows [row_begin(r), row_end(r)). With q = V / P and
/// e = V % P, the first e ranks own q + 1 rows and the others q, so rank r begins at
/// r·q + min(r, e); every rank owns a row (P <= V), owner(id) is O(1), and sorting ids also groups
/// them by owner (ShardedEmbedding's exchange relies on it).
/// Example: V = 10, P = 4 -> rows [0, 3), [3, 6), [6, 8), [8, 10).
class RowPartition {
 public:
  /// The partition of vocab_size rows over world_size ranks. Throws: ShapeError if vocab_size or
  /// world_size is not positive, or world_size > vocab_size (a rank without rows).
  RowPartition(Index vocab_size, int world_size)
      : vocab_size_(vocab_size), world_size_(world_size) {
    constexpr const char* where = "RowPartition";
    detail::check_positive_size(where, "vocab_size", vocab_size);
    detail::check_positive_size(where, "world_size", world_size);
    if (world_size > vocab_size) {
      throw ShapeError(detail::message(where, "world_size ", world_size, " exceeds vocab_size ",
                                       vocab_size, "; every rank must own at least one row"),
                       -1, vocab_size, world_size);
    }
    base_ = vocab_size / world_size;
    extra_ = vocab_size % world_size;
  }

  /// Total number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return vocab_size_; }
  /// Number of ranks P.
  [[nodiscard]] int world_size() const noexcept { return world_size_; }

  /// First row owned by `rank`; row_begin(world_size()) is vocab_size().
  /// Throws: IndexError if rank is outside [0, world_size()].
  [[nodiscard]] Index row_begin(int rank) const {
    detail::check_index({"RowPartition", "row_begin"}, "rank", rank, world_size_ + Index{1});
    return begin_of(rank);
  }
  /// One past the last row owned by `rank`. Throws: IndexError if rank is outside [0,
  /// world_size()).
  [[nodiscard]] Index row_end(int rank) const {
    detail::check_index({"RowPartition", "row_end"}, "rank", rank, world_size_);
    return begin_of(rank + 1);
  }
  /// Number of rows owned by `rank` (q or q + 1).
  /// Throws: IndexError if rank is outside [0, world_size()).
  [[nodiscard]] Index rows(int rank) const {
    detail::check_index({"RowPartition", "rows"}, "rank", rank, world_size_);
    return rows_of(rank);
  }

  /// The rank that owns row `id`. Throws: IndexError if id is outside [0, vocab_size()).
  [[nodiscard]] int owner(TokenId id) const {
    detail::check_index({"RowPartition", "owner"}, "id", id, vocab_size_);
    return owner_of(id);
  }

  /// The row of `id` inside its owner's shard.
  /// Throws: IndexError if id is outside [0, vocab_size()).
  [[nodiscard]] Index local_row(TokenId id) const {
    detail::check_index({"RowPartition", "local_row"}, "id", id, vocab_size_);
    return id - begin_of(owner_of(id));
  }

  /// True when both partitions split the same number of rows over the same number of ranks.
  friend bool operator==(const RowPartition& a, const RowPartition& b) noexcept {
    return a.vocab_size_ == b.vocab_size_ && a.world_size_ == b.world_size_;
  }

 private:
  template <class>
  friend class ShardedEmbedding;

  // The arithmetic of the calls above without their checks, for ShardedEmbedding, whose ranks
  // and ids are validated once at its own door.
  [[nodiscard]] Index begin_of(int rank) const {
    EMBER_ASSERT(rank >= 0 && rank <= world_size_);
    return static_cast<Index>(rank) * base_ + std::min<Index>(rank, extra_);
  }
  [[nodiscard]] Index rows_of(int rank) const {
    EMBER_ASSERT(rank >= 0 && rank < world_size_);
    return base_ + (rank < extra_ ? 1 : 0);
  }
  [[nodiscard]] int owner_of(TokenId id) const {
    EMBER_ASSERT(id >= 0 && id < vocab_size_);
    const Index split = extra_ * (base_ + 1);  // rows owned by the larger shards
    const Index r = id < split ? id / (base_ + 1) : extra_ + (id - split) / base_;
    return static_cast<int>(r);
  }

  Index vocab_size_;
  int world_size_;
  Index base_ = 0;
  Index extra_ = 0;
};

}  // namespace ember::inline EMBER_ISA::distributed

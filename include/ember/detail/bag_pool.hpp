/// EmbeddingBag kernels: pool the rows of each bag (sum, weighted sum, mean, max with argmax) of
/// a table of any codec in one pass per bag, and describe where the backward's per-position
/// gradients come from. Inputs were validated by EmbeddingBag's public calls.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/simd.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The pooling of a bag kernel (EmbeddingBag's BagMode, as numbers the kernels need not know).
enum class Pool { sum, mean, max };

/// Columns [c0, c0 + width) of one sum bag: out[c] = Σ_i w_i · table[ids[i], c] over the
/// positions of [begin, end) whose id is not skip_row, summed in position order from zero. The
/// running sums stay in registers for the whole bag (W·sizeof(T) = 256 bytes: 4 AVX-512 or 8 AVX
/// registers), as FBGEMM's generated kernels keep them, instead of a load and a store of the
/// output row per id. W is the fixed tile width, or Eigen::Dynamic for the last columns (fewer
/// than MaxW, kept on the stack). `ahead` > 0: prefetch the row of the id `ahead` positions on
/// (done by the first tile of a row only; 0 for the others). Weighted: weights[i] multiplies
/// each row, and the product is rounded before it is summed. Returns the number of pooled ids.
template <Index W, Index MaxW, bool Weighted, class T, class Id>
Index bag_sum_columns(ConstTableRef<T> table, std::span<const Id> ids, Index begin, Index end,
                      const T* weights, TokenId skip_row, Index c0, Index width, Index ahead,
                      T* out) {
  // DontAlign: the tile has the same layout in units built for any instruction set (an aligned
  // fixed-size Eigen array would be 16-, 32- or 64-byte aligned depending on the unit).
  using Tile = Eigen::Array<T, W, 1, Eigen::ColMajor | Eigen::DontAlign, MaxW, 1>;
  const auto n = static_cast<Index>(ids.size());
  Tile acc = Tile::Zero(width);
  Index count = 0;
  const Index row_bytes = table.cols * static_cast<Index>(sizeof(T));
  for (Index i = begin; i < end; ++i) {
    if (ahead > 0 && i + ahead < n) {
      prefetch_row(table.row(static_cast<Index>(ids[static_cast<std::size_t>(i + ahead)])),
                   row_bytes);
    }
    const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
    EMBER_ASSERT(id >= 0 && id < table.rows);
    if (id == skip_row) continue;
    const Eigen::Map<const Tile> row(table.row(static_cast<Index>(id)) + c0, width);
    if constexpr (Weighted) {
      const Tile product = weights[i] * row;
      acc += rounded(product);
    } else {
      acc += row;
    }
    ++count;
  }
  Eigen::Map<Tile>(out + c0, width) = acc;
  return count;
}

/// One sum bag (positions [begin, end)) into out[d]: whole tiles of 256 bytes of columns, then
/// the remaining columns (d not a multiple of the tile), each in registers. Weighted or not is
/// decided once per bag (bag_sum), outside the loops over its ids. Returns the number of pooled
/// ids.
template <bool Weighted, class T, class Id>
Index bag_sum_tiles(ConstTableRef<T> table, std::span<const Id> ids, Index begin, Index end,
                    const T* weights, TokenId skip_row, Index ahead, T* out) {
  constexpr auto kTile = static_cast<Index>(256 / sizeof(T));
  const Index d = table.cols;
  const Index tiled = d / kTile * kTile;
  Index count = 0;
  for (Index c0 = 0; c0 < tiled; c0 += kTile) {
    count = bag_sum_columns<kTile, kTile, Weighted>(table, ids, begin, end, weights, skip_row, c0,
                                                    kTile, c0 == 0 ? ahead : 0, out);
  }
  if (tiled == d) return count;
  return bag_sum_columns<Eigen::Dynamic, kTile, Weighted>(
      table, ids, begin, end, weights, skip_row, tiled, d - tiled, tiled == 0 ? ahead : 0, out);
}

/// bag_sum_tiles, weighted when `weights` is given.
template <class T, class Id>
Index bag_sum(ConstTableRef<T> table, std::span<const Id> ids, Index begin, Index end,
              const T* weights, TokenId skip_row, Index ahead, T* out) {
  return weights != nullptr
             ? bag_sum_tiles<true>(table, ids, begin, end, weights, skip_row, ahead, out)
             : bag_sum_tiles<false>(table, ids, begin, end, weights, skip_row, ahead, out);
}

/// One max bag over rows given by `row_of(i)` (the stored row for a plain table, the decoded one
/// otherwise): out[c] = max over the pooled positions, the first maximum winning ties; am (if not
/// null) receives the winning id of each column. Returns the number of pooled ids.
template <class T, class Id, class RowOf>
Index bag_max(std::span<const Id> ids, Index begin, Index end, Index d, TokenId skip_row,
              RowOf&& row_of, T* out, TokenId* am) {
  Eigen::Map<RowVector<T>> o(out, d);
  o.setZero();
  if (am != nullptr) std::fill(am, am + d, TokenId{-1});
  Index count = 0;
  for (Index i = begin; i < end; ++i) {
    const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
    if (id == skip_row) continue;
    const Eigen::Map<const RowVector<T>> row(row_of(i, id), d);
    if (count == 0) {
      o = row;
      if (am != nullptr) std::fill(am, am + d, id);
    } else if (am != nullptr) {
      for (Index c = 0; c < d; ++c) {
        if (row[c] > o[c]) {  // strict: the first maximum wins ties, as PyTorch
          o[c] = row[c];
          am[c] = id;
        }
      }
    } else {
      // The same strict comparison as a select, which compilers turn into vmaxps (whose NaN and
      // ±0 rules are exactly "row > o ? row : o").
      for (Index c = 0; c < d; ++c) o[c] = row[c] > o[c] ? row[c] : o[c];
    }
    ++count;
  }
  return count;
}

/// bags [bounds[b], bounds[b+1]) of ids[n], table[V, d] (any codec) -> out[B, d]; positions whose
/// id is skip_row (the padding row, or -1) are left out of the pooling and of the mean's count; a
/// bag with nothing pooled gives zeros (and argmax -1). weights (sum only) may be null.
/// A plain table is pooled from its stored rows (sums in registers, bag_sum); any other codec
/// decodes each row once (scale 1) and pools the decoded values exactly as a float table holding
/// them would be pooled.
/// Validated by EmbeddingBag::forward (bounds non-decreasing from 0 to n, ids in range).
template <class Codec, class Id>
void bag_pool(const CodecRows<Codec>& table, std::span<const Id> ids, std::span<const Index> bounds,
              Pool pool, const typename Codec::Value* weights, TokenId skip_row,
              TableRef<typename Codec::Value> out, TokenId* argmax) {
  using T = typename Codec::Value;
  const auto bags = static_cast<Index>(bounds.size()) - 1;
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.d;
  EMBER_ASSERT(out.rows == bags && out.cols == d);
  EMBER_ASSERT(pool == Pool::max || argmax == nullptr);
  const Index row_bytes = table.row_bytes();
  const Index ahead = table.ahead();
  parallel_rows(bags, n * d, [&](Index b_begin, Index b_end, int /*worker*/) {
    RowVector<T> decoded;
    if constexpr (!Codec::is_plain) decoded.resize(d);
    // The row of position i: the stored row of a plain table, else decoded (scale 1). Rows are
    // random: ask for the row `ahead` positions on (across bag ends).
    const auto row_of = [&](Index i, TokenId id) -> const T* {
      if (i + ahead < n) {
        prefetch_row(table.row(static_cast<Index>(ids[static_cast<std::size_t>(i + ahead)])),
                     row_bytes);
      }
      EMBER_ASSERT(id >= 0 && id < table.rows);
      if constexpr (Codec::is_plain) {
        return table.row(static_cast<Index>(id));
      } else {
        table.decode(static_cast<Index>(id), T(1), decoded.data());
        return decoded.data();
      }
    };
    for (Index b = b_begin; b < b_end; ++b) {
      const Index begin = bounds[static_cast<std::size_t>(b)];
      const Index end = bounds[static_cast<std::size_t>(b + 1)];
      Eigen::Map<RowVector<T>> o(out.row(b), d);
      if (pool == Pool::max) {
        bag_max<T>(ids, begin, end, d, skip_row, row_of, out.row(b),
                   argmax != nullptr ? argmax + b * d : nullptr);
        continue;
      }
      Index count = 0;
      if constexpr (Codec::is_plain) {
        const ConstTableRef<T> plain{table.data, table.rows, d, table.stride};
        count = bag_sum(plain, ids, begin, end, weights, skip_row, ahead, out.row(b));
      } else {
        o.setZero();
        for (Index i = begin; i < end; ++i) {
          const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
          if (id == skip_row) continue;
          const Eigen::Map<const RowVector<T>> row(row_of(i, id), d);
          if (weights != nullptr) {
            decoded *= weights[i];  // the product in a pass of its own, then summed
            o += decoded;
          } else {
            o += row;
          }
          ++count;
        }
      }
      if (pool == Pool::mean && count > 0) o /= static_cast<T>(count);
    }
  });
}

/// Distinct winners a bag may have before bag_max_winners sorts its d entries instead of
/// searching the winners found so far.
inline constexpr std::size_t kMaxWinnersLinear = 64;

/// The (bag, id) pairs of a max bag backward: for each bag b in order, the distinct ids that won
/// some column of b (argmax[b, c] >= 0), ascending; bag_out[k] is the bag of ids_out[k]. Every id
/// of a bag is listed after those of earlier bags, so grouping the pairs by id visits each id's
/// bags in order. Validated by EmbeddingBag::backward (argmax entries in [-1, V)).
///
/// A bag has at most as many winners as ids (~20 in a recommendation bag) while d runs to
/// thousands, so the distinct winners are collected by a linear search of the few found so far
/// (runs of one id skipped) instead of sorting all d entries of every bag. A bag whose winners
/// pass kMaxWinnersLinear falls back to sorting its d entries.
inline void bag_max_winners(const TokenId* argmax, Index bags, Index d,
                            std::vector<TokenId>& ids_out, std::vector<Index>& bag_out) {
  std::vector<TokenId> won;
  ids_out.clear();
  bag_out.clear();
  for (Index b = 0; b < bags; ++b) {
    const TokenId* row = argmax + b * d;
    const auto first = static_cast<std::ptrdiff_t>(ids_out.size());
    TokenId last = -1;
    bool many = false;
    for (Index c = 0; c < d; ++c) {
      const TokenId id = row[c];
      if (id < 0 || id == last) continue;
      last = id;
      if (std::find(ids_out.begin() + first, ids_out.end(), id) != ids_out.end()) continue;
      ids_out.push_back(id);
      if (ids_out.size() - static_cast<std::size_t>(first) > kMaxWinnersLinear) {
        many = true;
        break;
      }
    }
    if (many) {  // many distinct winners: sort the bag's d entries and keep each id once
      ids_out.resize(static_cast<std::size_t>(first));
      won.assign(row, row + d);
      std::sort(won.begin(), won.end());
      for (std::size_t c = 0; c < won.size(); ++c) {
        if (won[c] < 0 || (c > 0 && won[c] == won[c - 1])) continue;
        ids_out.push_back(won[c]);
      }
    } else {
      std::sort(ids_out.begin() + first, ids_out.end());
    }
    bag_out.resize(ids_out.size(), b);
  }
}

/// The rows of a bag backward (EmbeddingBag, TableBatchedBags): position p contributes the d
/// values of grad_out at grad + src[p] (its bag's row, at its feature's columns), times coef[p]
/// when coef is not null, or - for a (bag, winner) pair of a max bag, won[p] not null - only in
/// the columns where won[p][c] == id[p], +0 elsewhere. Each product or mask is written to
/// `scratch` first, the product rounded, so every position gives the very row a materialised
/// (positions x d) backward would hold, and a coefficient of 1 leaves a row's bits unchanged.
template <class T>
struct BagGradRows {
  const T* grad;
  Index d;
  const Index* src;
  const T* coef;              // null: every coefficient is 1
  const TokenId* const* won;  // null: no max bag on this table
  const TokenId* id;
  [[nodiscard]] const T* contribution(Index p, T* scratch) const noexcept {
    const T* row = source_row(p);
    if (won != nullptr && won[p] != nullptr) {
      const TokenId* w = won[p];
      const TokenId winner = id[p];
      for (Index c = 0; c < d; ++c) scratch[c] = w[c] == winner ? row[c] : T(0);
      return scratch;
    }
    if (coef == nullptr) return row;
    Eigen::Map<RowVector<T>>(scratch, d) = coef[p] * Eigen::Map<const RowVector<T>>(row, d);
    rounded(std::span<T>(scratch, static_cast<std::size_t>(d)));
    return scratch;
  }
  [[nodiscard]] const T* source_row(Index p) const noexcept { return grad + src[p]; }
};

/// What a bag backward accumulates into one table: its positions over all the bags that read it
/// (EmbeddingBag's one set, or every feature of a TableBatchedBags table, in feature and then
/// position order; a max bag's positions are its (bag, winner) pairs), as BagGradRows reads
/// them.
template <class T>
struct BagGradPositions {
  std::vector<TokenId> ids;
  std::vector<Index> src;           // offset of the position's grad_out segment
  std::vector<T> coef;              // empty: every coefficient is 1
  std::vector<const TokenId*> won;  // empty: no max bag
  /// Whether the rows need the accumulation's scratch (a product or a mask per position).
  [[nodiscard]] bool needs_scratch() const noexcept { return !coef.empty() || !won.empty(); }
  /// The rows over grad_out's values at `grad`, d per position.
  [[nodiscard]] BagGradRows<T> rows(const T* grad, Index d) const noexcept {
    return {grad,
            d,
            src.data(),
            coef.empty() ? nullptr : coef.data(),
            won.empty() ? nullptr : won.data(),
            ids.data()};
  }
};

/// Appends to `out` the positions of one set of bags (bounds[B + 1] relative to ids; bag b's
/// grad_out row at grad + b · stride + column): in sum and mean mode each position, with
/// coefficient weights[i] (sum; null: 1) or 1 / (pooled count of its bag) (mean, 0 for a bag of
/// padding only); in max mode the (bag, winner) pairs of argmax[B, d] (bag_max_winners), masked
/// by their bag's argmax row. with_coef / with_max: whether the table's positions carry
/// coefficients / masks (some set of bags over the table needs them), so that every set
/// appended to one table fills the same arrays. Positions whose id is skip_row are kept; the
/// accumulation skips them. Validated by the callers' public doors.
template <class T, class Id>
void append_bag_positions(BagGradPositions<T>& out, std::span<const Id> ids,
                          std::span<const Index> bounds, Pool pool, const T* weights,
                          const TokenId* argmax, Index d, Index stride, Index column,
                          TokenId skip_row, bool with_coef, bool with_max) {
  const auto bags = static_cast<Index>(bounds.size()) - 1;
  if (pool == Pool::max) {
    std::vector<TokenId> winners;
    std::vector<Index> bag_of;
    bag_max_winners(argmax, bags, d, winners, bag_of);
    out.ids.insert(out.ids.end(), winners.begin(), winners.end());
    if (with_coef) out.coef.resize(out.coef.size() + winners.size(), T(1));
    for (const Index b : bag_of) {
      out.src.push_back(b * stride + column);
      out.won.push_back(argmax + b * d);
    }
    return;
  }
  const std::size_t at = out.ids.size();
  out.ids.resize(at + ids.size());
  out.src.resize(at + ids.size());
  if (with_coef) out.coef.resize(at + ids.size(), T(1));
  if (with_max) out.won.resize(at + ids.size(), nullptr);
  for (Index b = 0; b < bags; ++b) {
    const auto begin = static_cast<std::size_t>(bounds[static_cast<std::size_t>(b)]);
    const auto end = static_cast<std::size_t>(bounds[static_cast<std::size_t>(b + 1)]);
    for (std::size_t i = begin; i < end; ++i) {
      out.ids[at + i] = static_cast<TokenId>(ids[i]);
      out.src[at + i] = b * stride + column;
    }
    if (pool == Pool::mean) {
      Index count = 0;
      for (std::size_t i = begin; i < end; ++i)
        if (static_cast<TokenId>(ids[i]) != skip_row) ++count;
      const T mean = count > 0 ? T(1) / static_cast<T>(count) : T(0);
      std::fill(out.coef.begin() + static_cast<std::ptrdiff_t>(at + begin),
                out.coef.begin() + static_cast<std::ptrdiff_t>(at + end), mean);
    } else if (weights != nullptr) {
      std::copy(weights + begin, weights + end,
                out.coef.begin() + static_cast<std::ptrdiff_t>(at + begin));
    }
  }
}

}  // namespace ember::inline EMBER_ISA::detail

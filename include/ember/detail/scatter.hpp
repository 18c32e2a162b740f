/// Scatter-side kernels of the sparse backward: grouping a batch's positions by id with a slot
/// map (no comparison sort of the n positions), the per-row ordered sums, and the accumulation
/// of those sums into a row-sparse gradient's (rows, values). Inputs were validated by the public
/// caller (SparseRowGrad::accumulate, the tables' backward).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Groups the positions of a batch of ids by id.
///
/// After group(ids, V, skip_row): rows() holds the distinct ids except skip_row, ascending, and
/// positions(j) the positions i with ids[i] == rows()[j], ascending. Cost O(n) plus sorting the u
/// distinct ids (radix sort from 512 of them, std::sort below), plus a V-entry int32 slot map
/// grown to the largest V seen and reset sparsely (only the u touched entries) at the end of every
/// call, so memory is O(V + n) ints, never O(V·d). Scratch is kept between calls: steady-state
/// grouping does not allocate, even when one grouper serves tables of different sizes.
class RowGrouper {
 public:
  /// Precondition: every id is in [0, vocab_size).
  template <class Id>
  void group(std::span<const Id> ids, Index vocab_size, TokenId skip_row) {
    const auto n = static_cast<Index>(ids.size());
    if (static_cast<Index>(slot_.size()) < vocab_size) {
      slot_.resize(static_cast<std::size_t>(vocab_size), -1);
    }
    // Every buffer is sized before the slot map is dirtied, so nothing below can throw while
    // slot_ holds entries of this call.
    const auto un = static_cast<std::size_t>(n);
    local_.resize(un);
    first_seen_.resize(un);
    count_.resize(un);
    rank_.resize(un);
    rows_.resize(un);
    sort_scratch_.resize(un);
    offsets_.resize(un + 1);
    positions_.resize(un);

    // Pass 1: a batch-local slot per distinct id, in order of first occurrence, and its count.
    // The map has an entry per table row (16 MB for 4M rows): ask for the entries ahead.
    constexpr Index kAhead = 16;
    std::int32_t u = 0;
    for (Index i = 0; i < n; ++i) {
      if (i + kAhead < n) {
        prefetch_row(&slot_[static_cast<std::size_t>(ids[static_cast<std::size_t>(i + kAhead)])], 4,
                     4);
      }
      const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
      EMBER_ASSERT(id >= 0 && id < vocab_size);
      if (id == skip_row) {
        local_[static_cast<std::size_t>(i)] = -1;
        continue;
      }
      std::int32_t& s = slot_[static_cast<std::size_t>(id)];
      if (s < 0) {
        s = u;
        first_seen_[static_cast<std::size_t>(u)] = id;
        count_[static_cast<std::size_t>(u)] = 0;
        ++u;
      }
      ++count_[static_cast<std::size_t>(s)];
      local_[static_cast<std::size_t>(i)] = s;
    }
    const auto uu = static_cast<std::size_t>(u);

    // Sorted distinct ids; rank_[local slot] = index in that order. Then the slot map is clean.
    std::copy_n(first_seen_.begin(), uu, rows_.begin());
    sort_ids(std::span<TokenId>(rows_.data(), uu), vocab_size);
    for (std::size_t j = 0; j < uu; ++j) {
      std::int32_t& s = slot_[static_cast<std::size_t>(rows_[j])];
      rank_[static_cast<std::size_t>(s)] = static_cast<std::int32_t>(j);
      s = -1;
    }

    // Pass 2: counting sort of positions by rank, stable, so each group stays ascending.
    offsets_[0] = 0;
    for (std::size_t s = 0; s < uu; ++s) {
      offsets_[static_cast<std::size_t>(rank_[s]) + 1] = count_[s];
    }
    for (std::size_t j = 0; j < uu; ++j) offsets_[j + 1] += offsets_[j];
    cursor_.assign(offsets_.begin(), offsets_.begin() + static_cast<std::ptrdiff_t>(uu));
    for (Index i = 0; i < n; ++i) {
      const std::int32_t s = local_[static_cast<std::size_t>(i)];
      if (s < 0) continue;
      const auto j = static_cast<std::size_t>(rank_[static_cast<std::size_t>(s)]);
      positions_[static_cast<std::size_t>(cursor_[j]++)] = i;
    }
    u_ = uu;
  }

  /// Distinct ids of the last group() call, ascending, skip_row excluded.
  [[nodiscard]] std::span<const TokenId> rows() const noexcept { return {rows_.data(), u_}; }

  /// Positions of rows()[j] in the last batch, ascending.
  [[nodiscard]] std::span<const Index> positions(std::size_t j) const noexcept {
    const auto begin = static_cast<std::size_t>(offsets_[j]);
    const auto end = static_cast<std::size_t>(offsets_[j + 1]);
    return {positions_.data() + begin, end - begin};
  }

 private:
  // Sorts distinct ids in [0, vocab_size): a least-significant-digit radix sort with 11-bit
  // digits (2 passes for vocabularies up to 4M) once there are enough ids to amortise the 2048
  // counters, std::sort below that.
  void sort_ids(std::span<TokenId> keys, Index vocab_size) {
    constexpr std::size_t kMinRadix = 512;
    constexpr int kBits = 11;
    constexpr std::size_t kBuckets = std::size_t{1} << kBits;
    const std::size_t u = keys.size();
    if (u < kMinRadix) {
      std::sort(keys.begin(), keys.end());
      return;
    }
    TokenId* src = keys.data();
    TokenId* dst = sort_scratch_.data();
    std::array<std::size_t, kBuckets> count{};
    for (int shift = 0; (static_cast<std::uint64_t>(vocab_size - 1) >> shift) != 0;
         shift += kBits) {
      count.fill(0);
      for (std::size_t i = 0; i < u; ++i) {
        ++count[(static_cast<std::uint64_t>(src[i]) >> shift) & (kBuckets - 1)];
      }
      std::size_t total = 0;
      for (auto& c : count) total += std::exchange(c, total);
      for (std::size_t i = 0; i < u; ++i) {
        dst[count[(static_cast<std::uint64_t>(src[i]) >> shift) & (kBuckets - 1)]++] = src[i];
      }
      std::swap(src, dst);
    }
    if (src != keys.data()) std::copy_n(src, u, keys.data());
  }

  std::vector<std::int32_t> slot_;  // at least V entries; -1 outside group()
  std::vector<std::int32_t> local_;
  std::vector<TokenId> first_seen_;
  std::vector<Index> count_;
  std::vector<std::int32_t> rank_;
  std::vector<TokenId> rows_;
  std::vector<Index> offsets_;
  std::vector<Index> cursor_;
  std::vector<Index> positions_;
  std::vector<TokenId> sort_scratch_;
  std::size_t u_ = 0;
};

/// The rows a SparseRowGrad accumulation reads: position p contributes grad_rows.row(p) as it is
/// (SparseRowGrad::accumulate).
template <class T>
struct DirectRows {
  ConstTableRef<T> rows;
  /// The row position p contributes; `scratch` is unused.
  [[nodiscard]] const T* contribution(Index p, T* /*scratch*/) const noexcept {
    return rows.row(p);
  }
  /// Where the row of position p lives, for prefetching.
  [[nodiscard]] const T* source_row(Index p) const noexcept { return rows.row(p); }
};

/// The rows of an indirect accumulation: position p contributes coef[p] · src.row(src_row[p])
/// (SparseRowGrad::accumulate_indirect); a null coef means 1. The product is rounded and stored in
/// `scratch` before it is summed, so it equals a materialised row coef[p] · src.row(src_row[p]).
template <class T, class SrcId>
struct GatheredRows {
  ConstTableRef<T> src;
  const SrcId* src_row;
  const T* coef;
  [[nodiscard]] const T* contribution(Index p, T* scratch) const noexcept {
    const T* row = source_row(p);
    if (coef == nullptr) return row;
    // Rounded before it is summed, as a materialised row is.
    Eigen::Map<RowVector<T>>(scratch, src.cols) =
        coef[p] * Eigen::Map<const RowVector<T>>(row, src.cols);
    rounded(std::span<T>(scratch, static_cast<std::size_t>(src.cols)));
    return scratch;
  }
  [[nodiscard]] const T* source_row(Index p) const noexcept {
    return src.row(static_cast<Index>(src_row[p]));
  }
};

/// dst (+)= row_scale · Σ_{p in positions} rows.contribution(p), the sum taken in the order of
/// `positions`. With `assign` the row is written instead of accumulated (a row created by this
/// call), which saves zero-filling it first. `sum` is caller scratch of d elements, `scratch`
/// another d for the rows' own use (GatheredRows' products).
template <class T, class Rows>
void add_row_sum(const Rows& rows, Index d, std::span<const Index> positions, T row_scale,
                 bool assign, T* dst, T* sum, T* scratch) {
  EMBER_ASSERT(!positions.empty());
  // Plain loops, not Eigen expressions: Eigen's out-of-line assignment loops are shared by name
  // between units built for different instruction sets, which ember's namespace cannot tag.
  const T* first = rows.contribution(positions[0], scratch);
  if (assign && positions.size() == 1) {
    for (Index c = 0; c < d; ++c) dst[c] = row_scale * first[c];  // a product alone
    return;
  }
  for (Index c = 0; c < d; ++c) sum[c] = first[c];
  for (std::size_t p = 1; p < positions.size(); ++p) {
    const T* next = rows.contribution(positions[p], scratch);
    for (Index c = 0; c < d; ++c) sum[c] += next[c];
  }
  if (assign) {
    for (Index c = 0; c < d; ++c) dst[c] = row_scale * sum[c];
    return;
  }
  // Scaled and rounded, then added: a fused multiply-add would make the running value depend on
  // the order of backward calls.
  for (Index c = 0; c < d; ++c) sum[c] *= row_scale;
  rounded(std::span<T>(sum, static_cast<std::size_t>(d)));
  for (Index c = 0; c < d; ++c) dst[c] += sum[c];
}

/// The scratch of the sparse backward, one per thread and reused by every call on that thread, so
/// a gradient is a plain value (rows and values) and steady-state accumulation does not allocate.
struct GradWorkspace {
  RowGrouper grouper;
  std::vector<Index> slots;
  std::vector<unsigned char> fresh;
  std::vector<TokenId> merged;
};

/// The calling thread's workspace.
inline GradWorkspace& grad_workspace() {
  thread_local GradWorkspace workspace;
  return workspace;
}

/// Per-worker scratch rows of value type T: one running sum and one product row per thread.
template <class T>
struct RowScratch {
  RowMatrix<T> sums;
  RowMatrix<T> products;
};

/// The calling thread's row scratch for values of type T.
template <class T>
RowScratch<T>& row_scratch() {
  thread_local RowScratch<T> scratch;
  return scratch;
}

/// The storage of a row-sparse gradient (SparseRowGrad's), as the accumulation grows and fills
/// it: `rows` sorted and unique, values.row(k) the gradient of rows[k], d values per row.
template <class T>
struct SparseRowsRef {
  std::vector<TokenId>& rows;
  RowMatrix<T>& values;
  Index d;
};

/// Makes g.rows the sorted union of g.rows and `incoming` (sorted, unique), moving existing values
/// to their new slots; writes the slot of each incoming row. New rows are zeroed, unless `fresh`
/// is given: then they are left unwritten and fresh[b] says whether incoming[b] is new (the
/// caller assigns those rows instead of adding to them). `merged` is scratch.
template <class T>
void grow_to_include(SparseRowsRef<T> g, std::span<const TokenId> incoming,
                     std::span<Index> slot_of, unsigned char* fresh, std::vector<TokenId>& merged) {
  const std::size_t k = g.rows.size();
  merged.clear();
  merged.reserve(k + incoming.size());
  std::size_t a = 0;
  std::size_t b = 0;
  while (a < k || b < incoming.size()) {
    if (b == incoming.size() || (a < k && g.rows[a] < incoming[b])) {
      merged.push_back(g.rows[a++]);
    } else {
      const bool existing = a < k && g.rows[a] == incoming[b];
      if (existing) ++a;
      if (fresh != nullptr) fresh[b] = existing ? 0 : 1;
      slot_of[b] = static_cast<Index>(merged.size());
      merged.push_back(incoming[b++]);
    }
  }
  if (merged.size() == k) return;  // no new rows: slots index the existing layout
  const auto grown_rows = static_cast<Index>(merged.size());
  if (k == 0) {
    // First rows since clear(): nothing to move.
    g.values.resize(grown_rows, g.d);
    if (fresh == nullptr) g.values.setZero();
  } else {
    RowMatrix<T> grown(grown_rows, g.d);
    std::size_t m = 0;
    for (std::size_t r = 0; r < k; ++r) {
      while (merged[m] != g.rows[r]) {
        if (fresh == nullptr) grown.row(static_cast<Index>(m)).setZero();
        ++m;
      }
      grown.row(static_cast<Index>(m++)) = g.values.row(static_cast<Index>(r));
    }
    if (fresh == nullptr) grown.bottomRows(grown_rows - static_cast<Index>(m)).setZero();
    g.values = std::move(grown);
  }
  g.rows.swap(merged);
}

/// The grouped pass every sparse backward shares: groups `ids` by row (skip_row left out), calls
/// prepare(distinct rows, ascending) once on the calling thread, then visits each distinct row j
/// (threads split the rows, never a sum) as visit(j, positions of j, row_scale, sum, product,
/// worker): row_scale is scale, or scale / count with `freq`; sum and product are d-element
/// scratch rows of the worker (product only with `needs_scratch`, for row policies that write a
/// product per position). The row a position contributes (`rows`) is prefetched one group ahead.
/// Validated by the public callers (ids in [0, vocab_size), the policy's rows d wide). All
/// scratch is sized before prepare runs, so a caller can keep the strong guarantee.
template <class T, class Id, class Rows, class Prepare, class Visit>
void for_each_grouped_row(Index vocab_size, std::span<const Id> ids, const Rows& rows,
                          bool needs_scratch, Index d, T scale, bool freq, TokenId skip_row,
                          Prepare&& prepare, Visit&& visit) {
  const auto n = static_cast<Index>(ids.size());
  if (n == 0) return;
  GradWorkspace& ws = grad_workspace();
  // Distinct ids (ascending) and each one's positions (ascending), without sorting positions.
  ws.grouper.group(ids, vocab_size, skip_row);
  const auto batch_rows = ws.grouper.rows();
  if (batch_rows.empty()) return;
  const auto u = static_cast<Index>(batch_rows.size());
  const int threads = kernel_threads(n * d);
  RowScratch<T>& scratch = row_scratch<T>();
  if (scratch.sums.rows() < threads || scratch.sums.cols() != d) scratch.sums.resize(threads, d);
  if (needs_scratch && (scratch.products.rows() < threads || scratch.products.cols() != d)) {
    scratch.products.resize(threads, d);
  }
  prepare(batch_rows);
  const RowGrouper& grouper = ws.grouper;
  const Index bytes = d * static_cast<Index>(sizeof(T));
  parallel_rows(u, n * d, [&](Index begin, Index end, int worker) {
    T* sum = scratch.sums.row(worker).data();
    T* product = needs_scratch ? scratch.products.row(worker).data() : nullptr;
    for (Index j = begin; j < end; ++j) {
      const auto uj = static_cast<std::size_t>(j);
      // Groups visit the rows in id order, i.e. at random positions: fetch the next ahead.
      if (j + 1 < end) prefetch_row(rows.source_row(grouper.positions(uj + 1)[0]), bytes, bytes);
      const auto positions = grouper.positions(uj);
      const T row_scale = freq ? scale / static_cast<T>(positions.size()) : scale;
      visit(j, positions, row_scale, sum, product, worker);
    }
  });
}

/// The accumulation of a sparse backward into a row-sparse gradient: g[ids[p]] += scale · (what
/// `rows` says position p contributes), each distinct id's contributions summed in position
/// order, then scaled and added to the row's running value (or assigned to a row this call
/// creates). Validated by SparseRowGrad's public calls; the gradient's layout changes only after
/// all scratch is sized (strong guarantee).
template <class T, class Id, class Rows>
void accumulate_rows(SparseRowsRef<T> g, Index vocab_size, std::span<const Id> ids,
                     const Rows& rows, bool needs_scratch, T scale, bool freq, TokenId skip_row) {
  GradWorkspace& ws = grad_workspace();
  for_each_grouped_row(
      vocab_size, ids, rows, needs_scratch, g.d, scale, freq, skip_row,
      [&](std::span<const TokenId> batch_rows) {
        ws.slots.resize(batch_rows.size());
        ws.fresh.resize(batch_rows.size());
        grow_to_include(g, batch_rows, std::span<Index>(ws.slots), ws.fresh.data(), ws.merged);
      },
      [&](Index j, std::span<const Index> positions, T row_scale, T* sum, T* product, int) {
        const auto uj = static_cast<std::size_t>(j);
        add_row_sum(rows, g.d, positions, row_scale, ws.fresh[uj] != 0,
                    g.values.row(ws.slots[uj]).data(), sum, product);
      });
}

}  // namespace ember::inline EMBER_ISA::detail

/// The top-k kernel of ember::top_k: the k best entries of a row by one scan with a k-entry heap.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// One entry of a row: its value and its column.
template <class T>
struct Ranked {
  T value;
  Index index;
};

/// True when a ranks above b: NaN above every number (torch.topk's order, from numpy's), a larger
/// number above a smaller one, and among equal values (NaNs, or -0 and +0) the lower index first.
/// A strict total order, so the k best of a row and their order are unique.
template <class T>
[[nodiscard]] EMBER_ALWAYS_INLINE bool ranks_above(const Ranked<T>& a,
                                                   const Ranked<T>& b) noexcept {
  const bool a_nan = a.value != a.value;
  const bool b_nan = b.value != b.value;
  if (a_nan || b_nan) return a_nan && (!b_nan || a.index < b.index);
  if (a.value != b.value) return a.value > b.value;
  return a.index < b.index;
}

/// Puts e in the place of heap[0] (the lowest ranked of the k kept, which e ranks above) and
/// sifts it down, so that every entry ranks below its children again.
template <class T>
EMBER_ALWAYS_INLINE void top_k_replace_lowest(Ranked<T>* heap, Index k, Ranked<T> e) noexcept {
  Index i = 0;
  for (;;) {
    Index c = 2 * i + 1;
    if (c >= k) break;
    if (c + 1 < k && ranks_above(heap[c], heap[c + 1])) ++c;  // the lower ranked child
    if (!ranks_above(e, heap[c])) break;
    heap[i] = heap[c];
    i = c;
  }
  heap[i] = e;
}

/// The k best entries of x[0, n) (columns first + j), k <= n, as a heap in `heap`: heap[0] is
/// the lowest ranked of them. One pass; an entry is compared with the heap only when it is not
/// <= the k-th best so far, which blocks of 16 test at once (most of a row, for k << n).
/// Called by ember::top_k with validated k; `heap` is scratch.
template <class T>
void top_k_heap(const T* x, Index n, Index first, Index k, std::vector<Ranked<T>>& heap) {
  EMBER_ASSERT(k >= 1 && k <= n);
  heap.resize(static_cast<std::size_t>(k));
  for (Index j = 0; j < k; ++j) heap[static_cast<std::size_t>(j)] = {x[j], first + j};
  std::make_heap(heap.begin(), heap.end(), ranks_above<T>);
  Ranked<T>* h = heap.data();
  auto offer = [&](Index j) {
    // An entry equal to the k-th best comes after it (a higher index): only > or NaN can enter.
    if (x[j] <= h[0].value) return;
    const Ranked<T> e{x[j], first + j};
    if (ranks_above(e, h[0])) top_k_replace_lowest(h, k, e);
  };
  constexpr Index kBlock = 16;
  Index j = k;
  for (; j + kBlock <= n; j += kBlock) {
    const T bar = h[0].value;
    unsigned hit = 0;
    for (Index t = 0; t < kBlock; ++t) hit |= static_cast<unsigned>(!(x[j + t] <= bar));
    if (hit != 0) {
      for (Index t = 0; t < kBlock; ++t) offer(j + t);
    }
  }
  for (; j < n; ++j) offer(j);
}

/// Writes the entries of `best` (any order) sorted best first to values[0, m) and indices[0, m),
/// m = best.size().
template <class T>
void top_k_write(std::span<Ranked<T>> best, T* values, TokenId* indices) {
  std::sort(best.begin(), best.end(), ranks_above<T>);
  for (std::size_t j = 0; j < best.size(); ++j) {
    values[j] = best[j].value;
    indices[j] = static_cast<TokenId>(best[j].index);
  }
}

/// Writes the k best of the union of the chunks' heaps of one row (each holding the k best of
/// its columns, or all of them) to values[0, k) and indices[0, k), best first.
template <class T>
void top_k_merge_write(std::span<const std::vector<Ranked<T>>> chunks, Index k,
                       std::vector<Ranked<T>>& scratch, T* values, TokenId* indices) {
  scratch.clear();
  for (const auto& c : chunks) scratch.insert(scratch.end(), c.begin(), c.end());
  EMBER_ASSERT(static_cast<Index>(scratch.size()) >= k);
  const auto kk = static_cast<std::ptrdiff_t>(k);
  std::nth_element(scratch.begin(), scratch.begin() + kk - 1, scratch.end(), ranks_above<T>);
  top_k_write(std::span<Ranked<T>>(scratch.data(), static_cast<std::size_t>(k)), values, indices);
}

}  // namespace ember::inline EMBER_ISA::detail

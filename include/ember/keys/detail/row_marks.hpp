/// detail::RowMarks: one bit a row for the rows a KeyIndex batch touched (which it never evicts)
/// or chose to evict (which it never chooses twice), cleared when the call ends.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ember/config.hpp"
#include "ember/keys/key_index_types.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The marks of rows [0, capacity): a bit vector, so that a batch asks "is this row mine?" with
/// one load, and clearing after a small batch costs a store per row it marked, not a fill.
class RowMarks {
 public:
  RowMarks() = default;
  /// No row marked, over rows [0, capacity).
  explicit RowMarks(Index capacity) : words_(static_cast<std::size_t>((capacity + 63) / 64), 0) {}

  [[nodiscard]] bool marked(Index r) const noexcept {
    return ((words_[static_cast<std::size_t>(r >> 6)] >> (r & 63)) & 1U) != 0;
  }
  void mark(Index r) noexcept {
    words_[static_cast<std::size_t>(r >> 6)] |= std::uint64_t{1} << (r & 63);
  }
  /// Marks row r without a branch; true when it was not marked yet (its first sighting).
  bool mark_first(Index r) noexcept {
    std::uint64_t& word = words_[static_cast<std::size_t>(r >> 6)];
    const std::uint64_t bit = std::uint64_t{1} << (r & 63);
    const bool first = (word & bit) == 0;
    word |= bit;
    return first;
  }

  /// Unmarks every row, given every row marked: those of `touched` and of `chosen`.
  void clear(const std::vector<Index>& touched, const std::vector<KeyRow>& chosen) noexcept {
    if (touched.size() > words_.size() / 4) {  // scattered stores would cost more than a fill
      std::fill(words_.begin(), words_.end(), std::uint64_t{0});
      return;
    }
    for (const Index r : touched) words_[static_cast<std::size_t>(r >> 6)] = 0;
    for (const KeyRow& v : chosen) words_[static_cast<std::size_t>(v.row >> 6)] = 0;
  }

  /// Bytes held.
  [[nodiscard]] std::size_t bytes() const noexcept {
    return words_.capacity() * sizeof(std::uint64_t);
  }

 private:
  std::vector<std::uint64_t> words_;
};

}  // namespace ember::inline EMBER_ISA::detail

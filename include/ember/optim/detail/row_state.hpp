/// Per-row optimizer state, allocated only for the rows that have been updated.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Per-row optimizer state: `planes` arrays of `width` values per row, plus an optional step
/// counter per row, allocated only for rows that have been updated at least once.
///
/// Layout: a V-sized int32 slot map (row -> slot, -1 = no state; allocated on first use, 4·V
/// bytes) and, per plane, a slot-major k x width array grown by std::vector's amortised doubling.
/// Memory is O(V + k·planes·width) for k rows ever updated, never O(V·width) unless every row is.
template <class T>
class RowState {
 public:
  RowState(int planes, bool with_steps)
      : planes_(static_cast<std::size_t>(planes)), with_steps_(with_steps) {}

  /// Number of rows holding state.
  [[nodiscard]] Index size() const noexcept { return static_cast<Index>(row_of_slot_.size()); }
  /// Values per row and plane.
  [[nodiscard]] Index width() const noexcept { return width_; }
  /// Number of planes (arrays of `width()` values per row).
  [[nodiscard]] int planes() const noexcept { return static_cast<int>(planes_.size()); }
  /// True when each row also counts its own steps.
  [[nodiscard]] bool with_steps() const noexcept { return with_steps_; }
  /// The slot of `row`, or -1 if it has no state.
  [[nodiscard]] Index slot(Index row) const noexcept {
    if (row < 0 || row >= static_cast<Index>(slot_of_row_.size())) return -1;
    return slot_of_row_[static_cast<std::size_t>(row)];
  }
  /// Rows holding state, in slot order (the order they were first updated).
  [[nodiscard]] std::span<const Index> rows() const noexcept { return row_of_slot_; }
  /// Plane `plane` of the row in `slot`: `width()` values.
  [[nodiscard]] T* data(int plane, Index slot) noexcept {
    return planes_[static_cast<std::size_t>(plane)].data() + slot * width_;
  }
  [[nodiscard]] const T* data(int plane, Index slot) const noexcept {
    return planes_[static_cast<std::size_t>(plane)].data() + slot * width_;
  }
  /// The row's own step counter (only with_steps).
  [[nodiscard]] std::int64_t& steps(Index slot) noexcept {
    return steps_[static_cast<std::size_t>(slot)];
  }
  [[nodiscard]] std::int64_t steps(Index slot) const noexcept {
    return steps_[static_cast<std::size_t>(slot)];
  }
  /// Bytes held by the state (slot map + planes + counters).
  [[nodiscard]] std::size_t bytes() const noexcept {
    std::size_t b = slot_of_row_.capacity() * sizeof(std::int32_t) +
                    row_of_slot_.capacity() * sizeof(Index) +
                    steps_.capacity() * sizeof(std::int64_t);
    for (const auto& p : planes_) b += p.capacity() * sizeof(T);
    return b;
  }

  /// Checks that the state can follow a vocab x width table: throws ShapeError if the width
  /// changed after state was created. Called by step() before anything is written.
  void check_table(detail::Where where, Index width) const {
    if (width_ != 0 && width != width_) [[unlikely]] {
      throw ShapeError(detail::message(where, "the table has ", width,
                                       " columns, but the optimizer's state was built for "
                                       "d_model = ",
                                       width_),
                       1, width_, width);
    }
  }

  /// Binds to the table shape, following a resized vocabulary: drops the state of rows >= vocab.
  /// Precondition: check_table passed.
  void follow_table(Index vocab, Index width) {
    width_ = width;
    if (vocab_ == vocab) return;
    if (vocab < vocab_ && !row_of_slot_.empty()) compact_below(vocab);
    vocab_ = vocab;
    if (!slot_of_row_.empty()) slot_of_row_.resize(static_cast<std::size_t>(vocab), -1);
  }

  /// Asks for the slot map entry of `row` ahead of an ensure(row) (a hint; valid row < vocab).
  void prefetch_slot(Index row) const noexcept {
    if (!slot_of_row_.empty())
      detail::prefetch_row(&slot_of_row_[static_cast<std::size_t>(row)], 4, 4);
  }

  /// The slot of `row`, creating zeroed state for it if needed (valid row < vocab).
  Index ensure(Index row) {
    if (slot_of_row_.empty()) slot_of_row_.assign(static_cast<std::size_t>(vocab_), -1);
    auto& s = slot_of_row_[static_cast<std::size_t>(row)];
    if (s >= 0) return s;
    EMBER_ASSERT(row_of_slot_.size() <
                 static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()));
    s = static_cast<std::int32_t>(row_of_slot_.size());
    row_of_slot_.push_back(row);
    for (auto& p : planes_) p.resize(p.size() + static_cast<std::size_t>(width_), T(0));
    if (with_steps_) steps_.push_back(0);
    return s;
  }

  /// Forgets the state of `row`, so its next update is a first update (a row reused for another
  /// key, see keyed/keyed_embedding.hpp); the last slot moves into its place. No-op for a row
  /// without state.
  void erase(Index row) {
    const Index s = slot(row);
    if (s < 0) return;
    const auto last = static_cast<Index>(row_of_slot_.size()) - 1;
    const auto width = static_cast<std::ptrdiff_t>(width_);
    if (s != last) {
      for (auto& p : planes_) std::copy_n(p.begin() + last * width, width_, p.begin() + s * width);
      if (with_steps_) steps_[static_cast<std::size_t>(s)] = steps_[static_cast<std::size_t>(last)];
      const Index moved = row_of_slot_[static_cast<std::size_t>(last)];
      row_of_slot_[static_cast<std::size_t>(s)] = moved;
      slot_of_row_[static_cast<std::size_t>(moved)] = static_cast<std::int32_t>(s);
    }
    slot_of_row_[static_cast<std::size_t>(row)] = -1;
    row_of_slot_.pop_back();
    for (auto& p : planes_) p.resize(static_cast<std::size_t>(last * width));
    if (with_steps_) steps_.pop_back();
  }

  /// Forgets every row's state.
  void clear() noexcept {
    slot_of_row_.clear();
    row_of_slot_.clear();
    steps_.clear();
    for (auto& p : planes_) p.clear();
  }

 private:
  void compact_below(Index vocab) {
    std::size_t w = 0;
    const auto width = static_cast<std::size_t>(width_);
    for (std::size_t s = 0; s < row_of_slot_.size(); ++s) {
      const Index row = row_of_slot_[s];
      if (row >= vocab) {
        slot_of_row_[static_cast<std::size_t>(row)] = -1;
        continue;
      }
      if (w != s) {
        for (auto& p : planes_)
          std::copy_n(p.begin() + static_cast<std::ptrdiff_t>(s * width), width,
                      p.begin() + static_cast<std::ptrdiff_t>(w * width));
        if (with_steps_) steps_[w] = steps_[s];
        row_of_slot_[w] = row;
        slot_of_row_[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(w);
      }
      ++w;
    }
    row_of_slot_.resize(w);
    for (auto& p : planes_) p.resize(w * width);
    if (with_steps_) steps_.resize(w);
  }

  std::vector<std::vector<T>> planes_;
  bool with_steps_;
  Index vocab_ = 0;
  Index width_ = 0;
  std::vector<std::int32_t> slot_of_row_;
  std::vector<Index> row_of_slot_;
  std::vector<std::int64_t> steps_;
};

}  // namespace ember::inline EMBER_ISA::detail

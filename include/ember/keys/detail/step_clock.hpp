/// detail::StepClock: how a KeyIndex row keeps its last step in 32 bits, exact over every int64
/// step: recent steps as offsets from a base, older ones as ranks with their steps on a side list.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The step of a row last seen before the base (an entry of the rank side list).
struct AncientStep {
  std::uint32_t row;
  std::int64_t step;
};

/// A row's last value v stands for the step base + (v - band) when v >= band: the steps
/// [base, base + span]. Rows last seen before the base hold their rank among those rows' steps
/// (v < band, equal steps equal rank) and their step in a side list of AncientStep sorted by row.
/// The order of the values is then the order of the steps, so the eviction order compares 32 bits
/// a row, and a step past base + span moves the base (a rebase: at most once every 2^30 steps).
struct StepClock {
  /// The value of the base step itself; values below it are ranks.
  static constexpr std::uint32_t band = std::uint32_t{1} << 31;
  /// The steps past the base that a value holds.
  static constexpr std::int64_t span = std::int64_t{band} - 1;

  /// The value of `step` against `base` (base <= step <= base + span).
  [[nodiscard]] static std::uint32_t relative(std::int64_t step, std::int64_t base) noexcept {
    return static_cast<std::uint32_t>(step - base + std::int64_t{band});
  }

  /// The base for `step` when the base is `base`: unchanged while step is within its span, else
  /// step - span / 2 (room for as many steps again as the rows keep behind it).
  [[nodiscard]] static std::int64_t base_for(std::int64_t base, std::int64_t step) noexcept {
    return step - base <= span ? base : step - span / 2;
  }

  /// The step that value v of row r stands for, against `base` and the side list `ancient`
  /// (which holds r when v is a rank).
  [[nodiscard]] static std::int64_t step_of(std::uint32_t v, Index r, std::int64_t base,
                                            std::span<const AncientStep> ancient) {
    if (v >= band) return base + (std::int64_t{v} - std::int64_t{band});
    const auto at = std::lower_bound(
        ancient.begin(), ancient.end(), r,
        [](const AncientStep& a, Index row) { return static_cast<Index>(a.row) < row; });
    EMBER_ASSERT(at != ancient.end() && static_cast<Index>(at->row) == r);
    return at->step;
  }

  /// Calls set_last(row, value) for every (row, step) of `steps` against `base`, and returns the
  /// side list: the rows whose step is below the base, ranked by (step, row), sorted by row.
  template <class SetLast>
  [[nodiscard]] static std::vector<AncientStep> encode(std::span<const AncientStep> steps,
                                                       std::int64_t base, SetLast&& set_last) {
    std::vector<AncientStep> ancient;
    for (const AncientStep& s : steps) {
      if (s.step < base) {
        ancient.push_back(s);
      } else {
        set_last(s.row, relative(s.step, base));
      }
    }
    std::sort(ancient.begin(), ancient.end(), [](const AncientStep& a, const AncientStep& b) {
      return a.step != b.step ? a.step < b.step : a.row < b.row;
    });
    std::uint32_t rank = 0;
    for (std::size_t i = 0; i < ancient.size(); ++i) {
      if (i > 0 && ancient[i].step != ancient[i - 1].step) ++rank;
      set_last(ancient[i].row, rank);
    }
    sort_by_row(ancient);
    return ancient;
  }

  /// Sorts a side list by row (the order step_of searches).
  static void sort_by_row(std::vector<AncientStep>& ancient) {
    std::sort(ancient.begin(), ancient.end(),
              [](const AncientStep& a, const AncientStep& b) { return a.row < b.row; });
  }
};

}  // namespace ember::inline EMBER_ISA::detail

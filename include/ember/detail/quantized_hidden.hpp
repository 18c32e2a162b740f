/// QuantizedHidden: hidden rows rounded to a dot type (8-bit codes with their scales, or 16-bit
/// values), in the layouts the tied-logits kernels read, computed once per logits call.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Codes per unit, units (lanes) per group, super-block size and its chunks.
inline constexpr Index qdot_unit = 32;
inline constexpr Index qdot_lanes = 16;
inline constexpr Index qdot_group = qdot_unit * qdot_lanes;
inline constexpr Index qdot_super = 256;

/// Zero-filled storage aligned to a cache line, for the rows the kernels stream.
template <class T>
class AlignedBuffer {
 public:
  void assign_zero(Index n) {
    const auto count = static_cast<std::size_t>(n);
    data_.reset(count == 0
                    ? nullptr
                    : static_cast<T*>(::operator new[](count * sizeof(T), std::align_val_t{64})));
    if (count != 0) std::memset(static_cast<void*>(data_.get()), 0, count * sizeof(T));
    size_ = n;
  }
  [[nodiscard]] T* data() noexcept { return data_.get(); }
  [[nodiscard]] const T* data() const noexcept { return data_.get(); }
  [[nodiscard]] Index size() const noexcept { return size_; }

 private:
  struct Free {
    void operator()(T* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<T, Free> data_;
  Index size_ = 0;
};

/// Hidden rows rounded for the integer kernels, in one of three layouts:
/// - units: per row and group of 16 units, codes[k][u][e] = code of element 4k + e of unit u
///   (512 bytes), and per unit its code sum (isum), scale (scale) and offset term (extra);
/// - super-blocks: per row and super-block, its 256 codes in order, the 16 sub-block sums (isum)
///   and its scale (scale, one per super-block);
/// - values: per row, the d values rounded to the dot type (F16, BF16), as floats.
struct QuantizedHidden {
  enum class Layout { units, super_blocks, values };
  Layout layout = Layout::values;
  Index rows = 0;
  Index d = 0;
  Index groups = 0;      ///< groups of 16 units, or super-blocks, per row
  Index group_size = 0;  ///< codes per group: qdot_group (units) or qdot_super (super-blocks)
  AlignedBuffer<std::int8_t> codes;
  AlignedBuffer<std::int32_t> isum;
  AlignedBuffer<float> scale;
  AlignedBuffer<float> extra;
  AlignedBuffer<float> values;

  /// Sizes the buffers for `n` rows of width `width` in `layout` (zeros everywhere).
  void reset(Layout l, Index n, Index width, bool with_extra) {
    layout = l;
    rows = n;
    d = width;
    if (l == Layout::values) {
      groups = 0;
      group_size = 0;
      values.assign_zero(n * width);
      return;
    }
    group_size = l == Layout::units ? qdot_group : qdot_super;
    groups = (width + group_size - 1) / group_size;
    codes.assign_zero(n * groups * group_size);
    isum.assign_zero(n * groups * qdot_lanes);
    scale.assign_zero(n * groups * (l == Layout::units ? qdot_lanes : 1));
    extra.assign_zero(with_extra ? n * groups * qdot_lanes : 0);
  }
  [[nodiscard]] Index lane_offset(Index j, Index g) const noexcept {
    return (j * groups + g) * qdot_lanes;
  }
  [[nodiscard]] const std::int8_t* group_codes(Index j, Index g) const noexcept {
    return codes.data() + (j * groups + g) * group_size;
  }
  [[nodiscard]] std::int8_t* group_codes(Index j, Index g) noexcept {
    return codes.data() + (j * groups + g) * group_size;
  }
  [[nodiscard]] const std::int32_t* group_isum(Index j, Index g) const noexcept {
    return isum.data() + lane_offset(j, g);
  }
  [[nodiscard]] std::int32_t* group_isum(Index j, Index g) noexcept {
    return isum.data() + lane_offset(j, g);
  }
  /// The scales of the 16 units of group g (units layout).
  [[nodiscard]] const float* unit_scales(Index j, Index g) const noexcept {
    return scale.data() + lane_offset(j, g);
  }
  [[nodiscard]] float* unit_scales(Index j, Index g) noexcept {
    return scale.data() + lane_offset(j, g);
  }
  /// The scale of super-block g (super-blocks layout).
  [[nodiscard]] const float* super_scale(Index j, Index g) const noexcept {
    return scale.data() + j * groups + g;
  }
  [[nodiscard]] float* super_scale(Index j, Index g) noexcept {
    return scale.data() + j * groups + g;
  }
  [[nodiscard]] const float* group_extra(Index j, Index g) const noexcept {
    return extra.data() + lane_offset(j, g);
  }
  [[nodiscard]] float* group_extra(Index j, Index g) noexcept {
    return extra.data() + lane_offset(j, g);
  }
  [[nodiscard]] const float* row_values(Index j) const noexcept { return values.data() + j * d; }
  [[nodiscard]] float* row_values(Index j) noexcept { return values.data() + j * d; }
};

}  // namespace ember::inline EMBER_ISA::detail

/// io::GgmlType: the tensor element types of ggml (and so of GGUF files), with ggml's numeric ids,
/// names, block sizes and bytes per block.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string_view>

#include "ember/config.hpp"
#include "ember/detail/ggml_blocks.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// The element types ggml defines, with ggml's own numeric values (`enum ggml_type` of ggml.h, as
/// of ggml 0.25.1, which ends at GGML_TYPE_COUNT = 43). A GGUF tensor's type field holds one of
/// these numbers.
///
/// Ids with no enumerator are not types: 4 and 5 (Q4_2, Q4_3) were removed from ggml long ago;
/// 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) were
/// in-memory repacked layouts that ggml no longer accepts in files. ggml_type_known() is false for
/// them and for everything from 43 on.
///
/// ember encodes and decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K...Q6_K
/// (ggml_type_decodes(); codec::Ggml, io/gguf.hpp); the others can be described (names, sizes)
/// but not decoded.
enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

namespace detail {
/// The id the block kernels of detail/ggml_blocks.hpp take for `type` (the same number).
[[nodiscard]] constexpr ember::detail::ggml::Type kernel_type(GgmlType type) noexcept {
  return static_cast<ember::detail::ggml::Type>(type);
}
}  // namespace detail

/// True when `id` is a type ggml defines today (an enumerator of GgmlType); false for the removed
/// ids 4, 5, 31-33, 36-38 and anything from 43 on.
[[nodiscard]] constexpr bool ggml_type_known(std::uint32_t id) noexcept {
  return ember::detail::ggml::type_row(id).block_size != 0;
}

/// ggml's name of `type` ("f32", "q4_K", "iq2_xxs", ...), as ggml_type_name() and GGUF tools print
/// it; "unknown" for a value that is not a type.
[[nodiscard]] constexpr std::string_view to_string(GgmlType type) noexcept {
  return ember::detail::ggml::traits(detail::kernel_type(type)).name;
}

/// Elements per block of `type` (1 for the plain types, 32 for Q4_0...Q8_1, 256 for the K-quants,
/// ...), as ggml_blck_size(); 0 for a value that is not a type. A row of a tensor of this type
/// holds a whole number of blocks.
[[nodiscard]] constexpr Index ggml_block_size(GgmlType type) noexcept {
  return Index{ember::detail::ggml::type_row(static_cast<std::uint32_t>(type)).block_size};
}

/// Bytes per block of `type`, as ggml_type_size(); 0 for a value that is not a type.
[[nodiscard]] constexpr Index ggml_type_size(GgmlType type) noexcept {
  return Index{ember::detail::ggml::type_row(static_cast<std::uint32_t>(type)).type_size};
}

/// Bytes of a row of `n` elements of `type`: n / ggml_block_size(type) blocks, as ggml_row_size().
/// Precondition: `type` is known and n is a non-negative multiple of its block size.
[[nodiscard]] constexpr Index ggml_row_size(GgmlType type, Index n) noexcept {
  return ember::detail::ggml::row_bytes(detail::kernel_type(type), n);
}

/// True when ember encodes and decodes `type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
/// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): GgufWriter can store it, GgufFile::load and GgufFile::table
/// read it.
[[nodiscard]] constexpr bool ggml_type_decodes(GgmlType type) noexcept {
  return ember::detail::ggml::decodes(detail::kernel_type(type));
}

}  // namespace ember::inline EMBER_ISA::io

/// GgmlType: the tensor element types of ggml (and so of GGUF files), with ggml's numeric ids,
/// names, block sizes and bytes per block.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string_view>

#include "ember/types.hpp"

namespace ember {

/// The element types ggml defines, with ggml's own numeric values (`enum ggml_type` of ggml.h, as
/// of ggml 0.25.1, which ends at GGML_TYPE_COUNT = 43). A GGUF tensor's type field holds one of
/// these numbers.
///
/// Ids with no enumerator are not types: 4 and 5 (Q4_2, Q4_3) were removed from ggml long ago;
/// 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) were
/// in-memory repacked layouts that ggml no longer accepts in files. ggml_type_known() is false for
/// them and for everything from 43 on.
///
/// ember encodes and decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K...Q6_K (see
/// io/gguf.hpp); the others can be described (names, sizes) but not decoded.
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

/// ggml's type traits: name, elements per block, bytes per block. Zero sizes and an empty name
/// mark an id that is not a type.
struct GgmlTypeRow {
  std::string_view name;
  std::uint32_t block_size;
  std::uint32_t type_size;
};

/// One row per id 0..42, as ggml.c's type_traits table (sizes are sizeof of ggml-common.h's
/// block structs).
inline constexpr GgmlTypeRow ggml_type_rows[] = {
    {"f32", 1, 4},        {"f16", 1, 2},       {"q4_0", 32, 18},     {"q4_1", 32, 20},
    {"", 0, 0},           {"", 0, 0},          {"q5_0", 32, 22},     {"q5_1", 32, 24},
    {"q8_0", 32, 34},     {"q8_1", 32, 36},    {"q2_K", 256, 84},    {"q3_K", 256, 110},
    {"q4_K", 256, 144},   {"q5_K", 256, 176},  {"q6_K", 256, 210},   {"q8_K", 256, 292},
    {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},   {"iq3_s", 256, 110}, {"iq2_s", 256, 82},   {"iq4_xs", 256, 136},
    {"i8", 1, 1},         {"i16", 1, 2},       {"i32", 1, 4},        {"i64", 1, 8},
    {"f64", 1, 8},        {"iq1_m", 256, 56},  {"bf16", 1, 2},       {"", 0, 0},
    {"", 0, 0},           {"", 0, 0},          {"tq1_0", 256, 54},   {"tq2_0", 256, 66},
    {"", 0, 0},           {"", 0, 0},          {"", 0, 0},           {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},    {"q1_0", 128, 18},   {"q2_0", 64, 18},
};

/// Number of ids ggml's table covers (GGML_TYPE_COUNT).
inline constexpr std::uint32_t ggml_type_count = 43;
static_assert(sizeof(ggml_type_rows) / sizeof(ggml_type_rows[0]) == ggml_type_count);

}  // namespace detail

/// True when `id` is a type ggml defines today (an enumerator of GgmlType); false for the removed
/// ids 4, 5, 31-33, 36-38 and anything from 43 on.
[[nodiscard]] constexpr bool ggml_type_known(std::uint32_t id) noexcept {
  return id < detail::ggml_type_count && detail::ggml_type_rows[id].block_size != 0;
}

/// ggml's name of `type` ("f32", "q4_K", "iq2_xxs", ...), as ggml_type_name() and GGUF tools print
/// it; "unknown" for a value that is not a type.
[[nodiscard]] constexpr std::string_view to_string(GgmlType type) noexcept {
  const auto id = static_cast<std::uint32_t>(type);
  return ggml_type_known(id) ? detail::ggml_type_rows[id].name : std::string_view("unknown");
}

/// Elements per block of `type` (1 for the plain types, 32 for Q4_0...Q8_1, 256 for the K-quants,
/// ...), as ggml_blck_size(); 0 for a value that is not a type. A row of a tensor of this type
/// holds a whole number of blocks.
[[nodiscard]] constexpr Index ggml_block_size(GgmlType type) noexcept {
  const auto id = static_cast<std::uint32_t>(type);
  return ggml_type_known(id) ? Index{detail::ggml_type_rows[id].block_size} : 0;
}

/// Bytes per block of `type`, as ggml_type_size(); 0 for a value that is not a type.
[[nodiscard]] constexpr Index ggml_type_size(GgmlType type) noexcept {
  const auto id = static_cast<std::uint32_t>(type);
  return ggml_type_known(id) ? Index{detail::ggml_type_rows[id].type_size} : 0;
}

/// Bytes of a row of `n` elements of `type`: n / ggml_block_size(type) blocks, as ggml_row_size().
/// Precondition: `type` is known and n is a non-negative multiple of its block size.
[[nodiscard]] constexpr Index ggml_row_size(GgmlType type, Index n) noexcept {
  return n / ggml_block_size(type) * ggml_type_size(type);
}

}  // namespace ember

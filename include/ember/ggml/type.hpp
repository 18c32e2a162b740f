/// ember::GgmlType: the tensor element types of ggml (and so of GGUF files) with ggml's numeric
/// ids, names, block sizes and bytes per block; the one enum every ggml kernel, codec and file
/// reader of ember takes.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The element types ggml defines, with ggml's own numeric values (`enum ggml_type` of ggml.h, as
/// of ggml 0.25.1, which ends at GGML_TYPE_COUNT = 43). A GGUF tensor's type field holds one of
/// these numbers (also spelled ember::io::GgmlType).
///
/// Ids with no enumerator are not types: 4 and 5 (Q4_2, Q4_3) were removed from ggml long ago;
/// 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) were
/// in-memory repacked layouts that ggml no longer accepts in files. ggml_type_known() is false for
/// them and for everything from 43 on.
///
/// ember encodes and decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K...Q6_K
/// (ggml_type_decodes(); codec::Ggml, io/gguf.hpp); the others can be described (names, sizes)
/// but not decoded.
// clang-format off
enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};
// clang-format on

namespace detail::ggml {

/// ggml's type traits of one id: name ("unknown" for an id that is not a type), elements per block
/// and bytes per block (0 for an id that is not a type), and whether ember encodes and decodes it.
struct Traits {
  std::string_view name;
  Index block_size;
  Index block_bytes;
  bool decodes;
};

/// The row of a block type ember decodes: its sizes are those of its layout.
template <class Block>
[[nodiscard]] constexpr Traits block_traits(std::string_view name) noexcept {
  return {name, Block::elements, Index{sizeof(Block)}, true};
}

/// One row per id 0..42, as ggml.c's type_traits table (ggml 0.25.1, GGML_TYPE_COUNT = 43); the
/// sizes of the types ember decodes are those of their layouts.
// clang-format off
inline constexpr Traits type_table[] = {
    {"f32", 1, 4, true}, {"f16", 1, 2, true}, block_traits<BlockQ4_0>("q4_0"),
    block_traits<BlockQ4_1>("q4_1"), {"unknown", 0, 0, false}, {"unknown", 0, 0, false},
    block_traits<BlockQ5_0>("q5_0"), block_traits<BlockQ5_1>("q5_1"),
    block_traits<BlockQ8_0>("q8_0"), {"q8_1", 32, sizeof(BlockQ8_1), false},
    block_traits<BlockQ2_K>("q2_K"), block_traits<BlockQ3_K>("q3_K"),
    block_traits<BlockQ4_K>("q4_K"), block_traits<BlockQ5_K>("q5_K"),
    block_traits<BlockQ6_K>("q6_K"), {"q8_K", 256, sizeof(BlockQ8_K), false},
    {"iq2_xxs", 256, 66, false}, {"iq2_xs", 256, 74, false}, {"iq3_xxs", 256, 98, false},
    {"iq1_s", 256, 50, false}, {"iq4_nl", 32, 18, false}, {"iq3_s", 256, 110, false},
    {"iq2_s", 256, 82, false}, {"iq4_xs", 256, 136, false}, {"i8", 1, 1, false},
    {"i16", 1, 2, false}, {"i32", 1, 4, false}, {"i64", 1, 8, false}, {"f64", 1, 8, false},
    {"iq1_m", 256, 56, false}, {"bf16", 1, 2, true}, {"unknown", 0, 0, false},
    {"unknown", 0, 0, false}, {"unknown", 0, 0, false}, {"tq1_0", 256, 54, false},
    {"tq2_0", 256, 66, false}, {"unknown", 0, 0, false}, {"unknown", 0, 0, false},
    {"unknown", 0, 0, false}, {"mxfp4", 32, 17, false}, {"nvfp4", 64, 36, false},
    {"q1_0", 128, 18, false}, {"q2_0", 64, 18, false},
};
// clang-format on
static_assert(std::size(type_table) == 43, "one row per id below GGML_TYPE_COUNT");

/// The traits of `type` (any id: past the table, those of an id that is not a type).
[[nodiscard]] constexpr Traits traits(GgmlType type) noexcept {
  const auto id = static_cast<std::uint32_t>(type);
  return id < std::size(type_table) ? type_table[id] : Traits{"unknown", 0, 0, false};
}

/// The types ember encodes and decodes, in ggml's id order.
inline constexpr GgmlType codec_types[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
    GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::BF16};

/// True when ember encodes and decodes `type`.
[[nodiscard]] constexpr bool decodes(GgmlType type) noexcept { return traits(type).decodes; }

/// Bytes of a row of d elements of `type` (d a multiple of its block size).
[[nodiscard]] constexpr Index row_bytes(GgmlType type, Index d) noexcept {
  const Traits t = traits(type);
  return d / t.block_size * t.block_bytes;
}

/// A block type ember decodes and its layout.
template <GgmlType T, class B>
struct BlockKind {
  static constexpr GgmlType type = T;
  using Block = B;
};
using BlockKinds =
    std::tuple<BlockKind<GgmlType::Q4_0, BlockQ4_0>, BlockKind<GgmlType::Q4_1, BlockQ4_1>,
               BlockKind<GgmlType::Q5_0, BlockQ5_0>, BlockKind<GgmlType::Q5_1, BlockQ5_1>,
               BlockKind<GgmlType::Q8_0, BlockQ8_0>, BlockKind<GgmlType::Q2_K, BlockQ2_K>,
               BlockKind<GgmlType::Q3_K, BlockQ3_K>, BlockKind<GgmlType::Q4_K, BlockQ4_K>,
               BlockKind<GgmlType::Q5_K, BlockQ5_K>, BlockKind<GgmlType::Q6_K, BlockQ6_K>>;

/// Calls f(std::type_identity<Block>{}) with the layout of a block type ember decodes and returns
/// true; returns false for the plain types (F32, F16, BF16) and those ember does not decode. The
/// one dispatch from a type to its block kernels, which are overloads on that tag.
template <class F>
constexpr bool visit_block(GgmlType type, F&& f) {
  return std::apply(
      [&](auto... kind) {
        return ((kind.type == type &&
                 (f(std::type_identity<typename decltype(kind)::Block>{}), true)) ||
                ...);
      },
      BlockKinds{});
}

}  // namespace detail::ggml

/// True when `id` is a type ggml defines today (an enumerator of GgmlType); false for the removed
/// ids 4, 5, 31-33, 36-38 and anything from 43 on.
[[nodiscard]] constexpr bool ggml_type_known(std::uint32_t id) noexcept {
  return detail::ggml::traits(static_cast<GgmlType>(id)).block_size != 0;
}

/// ggml's name of `type` ("f32", "q4_K", "iq2_xxs", ...), as ggml_type_name() and GGUF tools print
/// it; "unknown" for a value that is not a type.
[[nodiscard]] constexpr std::string_view to_string(GgmlType type) noexcept {
  return detail::ggml::traits(type).name;
}

/// Elements per block of `type` (1 for the plain types, 32 for Q4_0...Q8_1, 256 for the K-quants,
/// ...), as ggml_blck_size(); 0 for a value that is not a type. A row of a tensor of this type
/// holds a whole number of blocks.
[[nodiscard]] constexpr Index ggml_block_size(GgmlType type) noexcept {
  return detail::ggml::traits(type).block_size;
}

/// Bytes per block of `type`, as ggml_type_size(); 0 for a value that is not a type.
[[nodiscard]] constexpr Index ggml_type_size(GgmlType type) noexcept {
  return detail::ggml::traits(type).block_bytes;
}

/// Bytes of a row of `n` elements of `type`: n / ggml_block_size(type) blocks, as ggml_row_size().
/// Precondition: `type` is known and n is a non-negative multiple of its block size.
[[nodiscard]] constexpr Index ggml_row_size(GgmlType type, Index n) noexcept {
  return detail::ggml::row_bytes(type, n);
}

/// True when ember encodes and decodes `type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
/// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): GgufWriter can store it, GgufFile::load and GgufFile::table
/// read it.
[[nodiscard]] constexpr bool ggml_type_decodes(GgmlType type) noexcept {
  return detail::ggml::decodes(type);
}

}  // namespace ember::inline EMBER_ISA

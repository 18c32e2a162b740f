/// The lookup of a ggml row: decoded and scaled straight into its output (ordinary or streaming
/// stores), the values of ggml/decode.hpp's reference decoders times the scale, bit for bit in
/// every build. The AVX2 kernel is in ggml/lookup_avx2.hpp; the portable one is here.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "ember/config.hpp"
#include "ember/ggml/decode.hpp"
#include "ember/ggml/isa.hpp"
#include "ember/ggml/lookup_avx2.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

namespace portable {

/// decode_row_scaled by the reference decoder, then the scale (Stream: ordinary stores all the
/// same, a portable build has nothing to stream).
template <bool Stream>
void decode_row_scaled(GgmlType type, const std::uint8_t* row, Index d, float s, float* dst) {
  decode_row(type, row, d, dst);
  for (Index c = 0; c < d; ++c) dst[c] = dst[c] * s;
}

}  // namespace portable

#if EMBER_DETAIL_GGML_AVX2
namespace lookup_isa = avx2;
/// True where decode_row_scaled<true> streams its stores (codec::Ggml then offers
/// decode_row_streaming).
inline constexpr bool lookup_streams = true;
#else
namespace lookup_isa = portable;
inline constexpr bool lookup_streams = false;
#endif

/// dst[c] = decoded(row)[c] · s for c in [0, d): decode_row's value (ggml's dequantization, bit for
/// bit) times s, rounded once. Stream: the stores are non-temporal where lookup_streams (dst must
/// then be 32-byte aligned, and the caller orders them with an sfence before the output is
/// published), ordinary otherwise.
/// Preconditions: as decode_row.
template <bool Stream = false>
void decode_row_scaled(GgmlType type, const std::uint8_t* row, Index d, float s, float* dst) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  lookup_isa::decode_row_scaled<Stream>(type, row, d, s, dst);
}

}  // namespace ember::inline EMBER_ISA::detail::ggml

/// The AVX2 lookup of a ggml row: each row decoded and scaled straight into its output, with
/// ordinary or non-temporal stores, the values of ggml/decode.hpp's reference decoders bit for bit.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/ggml/isa.hpp"

#if EMBER_DETAIL_GGML_AVX2
#include <immintrin.h>

#include <cstdint>

#include "ember/config.hpp"
#include "ember/ggml/type.hpp"
#include "ember/ggml/unpack_avx2.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml::avx2 {

/// Sink of a lookup: dst[c] = y · s, stored (or streamed: dst 32-byte aligned).
template <bool Stream>
struct ScaledStore {
  float* dst;
  float s;
  __m256 vs = _mm256_set1_ps(s);
  EMBER_ALWAYS_INLINE void store(Index c, __m256 y) const noexcept {
    if constexpr (Stream) {
      _mm256_stream_ps(dst + c, _mm256_mul_ps(y, vs));
    } else {
      _mm256_storeu_ps(dst + c, _mm256_mul_ps(y, vs));
    }
  }
  template <bool Offset, bool Same, bool Signed>
  EMBER_ALWAYS_INLINE void codes(Index c, const Codes32<Offset, Same, Signed>& g) const {
    EMBER_UNROLL for (int i = 0; i < 4; ++i) store(c + 8 * i, g.value(i));
  }
  EMBER_ALWAYS_INLINE void put32(Index c, __m256 y0, __m256 y1, __m256 y2, __m256 y3) const {
    store(c, y0);
    store(c + 8, y1);
    store(c + 16, y2);
    store(c + 24, y3);
  }
  EMBER_ALWAYS_INLINE void put1(Index c, float y) const noexcept { dst[c] = y * s; }
};

/// ggml/lookup.hpp's decode_row_scaled with AVX2: Stream stores non-temporally (dst 32-byte
/// aligned).
template <bool Stream>
void decode_row_scaled(GgmlType type, const std::uint8_t* row, Index d, float s, float* dst) {
  EMBER_ASSERT(!Stream || reinterpret_cast<std::uintptr_t>(dst) % 32 == 0);
  ScaledStore<Stream> sink{dst, s};
  feed_row(type, row, d, sink);
}

}  // namespace ember::inline EMBER_ISA::detail::ggml::avx2

#endif  // EMBER_DETAIL_GGML_AVX2

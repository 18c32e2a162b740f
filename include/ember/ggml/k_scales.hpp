/// ggml's kmask shuffles of a K-quant super-block's packed 6-bit scales into one byte each, as
/// ggml's x86 dot kernels do, in scalar code (SSE2) and by vector operations (AVX2): shared by the
/// AVX2 and the AVX-512 VNNI kernels.
// SPDX-License-Identifier: MIT
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>

#include <cstdint>
#include <cstring>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

/// ggml's kmask shuffle: the 8 six-bit scales (low 8 bytes) and mins (high 8 bytes) of Q4_K/Q5_K.
EMBER_ALWAYS_INLINE __m128i k4_scales_mins(const std::uint8_t* s) noexcept {
  std::uint32_t u[4];
  std::memcpy(u, s, 12);
  constexpr std::uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const std::uint32_t mins_low = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = mins_low;
  u[0] &= kmask1;
  return _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]), static_cast<int>(u[2]),
                        static_cast<int>(u[3]));
}

/// The 16 six-bit scales of a Q3_K block (stored minus 32), as ggml's kmask shuffle.
EMBER_ALWAYS_INLINE __m128i q3k_scales(const std::uint8_t* s) noexcept {
  std::uint32_t a[4];
  std::memcpy(a, s, 12);
  constexpr std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  const std::uint32_t t = a[2];
  a[2] = ((a[0] >> 4) & kmask2) | (((t >> 4) & kmask1) << 4);
  a[3] = ((a[1] >> 4) & kmask2) | (((t >> 6) & kmask1) << 4);
  a[0] = (a[0] & kmask2) | (((t >> 0) & kmask1) << 4);
  a[1] = (a[1] & kmask2) | (((t >> 2) & kmask1) << 4);
  return _mm_setr_epi32(static_cast<int>(a[0]), static_cast<int>(a[1]), static_cast<int>(a[2]),
                        static_cast<int>(a[3]));
}

#if defined(__AVX2__)
#include <immintrin.h>

/// The 12 scale bytes at s in the low three dwords, the fourth zero: a masked load, so that the
/// bytes after them are never read (Q3_K's scales end 2 bytes before the block does).
EMBER_ALWAYS_INLINE __m128i load_scales12(const std::uint8_t* s) noexcept {
  return _mm_maskload_epi32(reinterpret_cast<const int*>(s), _mm_setr_epi32(-1, -1, -1, 0));
}

/// k4_scales_mins by vector operations (the same bytes).
EMBER_ALWAYS_INLINE __m128i k4_scales_mins_v(const std::uint8_t* s) noexcept {
  const __m128i u = load_scales12(s);                               // u0 u1 u2 0
  const __m128i p = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  const __m128i q = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 3, 0, 3));  // 0 u0 0 u1
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(p, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  // Bits 6-7 of each byte of u0 (u1) to bits 4-5: ((u >> 6) & kmask3) << 4.
  const __m128i high = _mm_and_si128(_mm_srli_epi32(q, 2), _mm_set1_epi32(0x30303030));
  return _mm_or_si128(low, high);
}

/// q3k_scales by vector operations (the same bytes).
EMBER_ALWAYS_INLINE __m128i q3k_scales_v(const std::uint8_t* s) noexcept {
  const __m128i a = load_scales12(s);                               // a0 a1 t 0
  const __m128i p = _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 1, 0));  // a0 a1 a0 a1
  const __m128i t = _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 2, 2, 2));
  const __m128i low =
      _mm_and_si128(_mm_srlv_epi32(p, _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi32(0x0f0f0f0f));
  const __m128i high = _mm_slli_epi32(
      _mm_and_si128(_mm_srlv_epi32(t, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi32(0x03030303)), 4);
  return _mm_or_si128(low, high);
}
#endif  // __AVX2__

}  // namespace ember::inline EMBER_ISA::detail::ggml

#endif  // __SSE2__

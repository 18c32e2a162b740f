/// ggml's kmask shuffles of a K-quant super-block's packed 6-bit scales into one byte each, as
/// ggml's x86 dot kernels do: shared by the AVX2 and the AVX-512 VNNI kernels (SSE2 only).
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

}  // namespace ember::inline EMBER_ISA::detail::ggml

#endif  // __SSE2__

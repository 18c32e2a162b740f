/// IEEE half (binary16) and bfloat16 <-> float for every layer that stores 16-bit floats as bits
/// (ggml's blocks and F16/BF16 tensors, npy and safetensors files), by the arithmetic of ggml's
/// scalar conversions (ggml-impl.h), so a value converts to the same bits wherever ember does it.
// SPDX-License-Identifier: MIT
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The little-endian 16 bits at p, at any alignment.
[[nodiscard]] inline std::uint16_t load_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

/// Half -> float by the arithmetic of ggml_compute_fp16_to_fp32 (exact for every non-NaN value;
/// a NaN is quieted with its payload kept, as that arithmetic does).
[[nodiscard]] inline float fp16_to_fp32(std::uint16_t h) noexcept {
  const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
  const std::uint32_t sign = w & 0x80000000u;
  const std::uint32_t two_w = w + w;
  const std::uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = std::bit_cast<float>((two_w >> 4) + exp_offset) * exp_scale;
  const std::uint32_t magic_mask = 126u << 23;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | magic_mask) - 0.5f;
  const std::uint32_t denormalized_cutoff = 1u << 27;
  const std::uint32_t result =
      sign | (two_w < denormalized_cutoff ? std::bit_cast<std::uint32_t>(denormalized)
                                          : std::bit_cast<std::uint32_t>(normalized));
  return std::bit_cast<float>(result);
}

/// Float -> half, rounded to nearest even, by the arithmetic of ggml_compute_fp32_to_fp16
/// (GGML_FP32_TO_FP16): overflow gives infinity, every NaN gives 0x7E00 with the sign kept.
[[nodiscard]] inline std::uint16_t fp32_to_fp16(float f) noexcept {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  const float scaled = std::fabs(f) * scale_to_inf;
  float base = rounded(scaled * scale_to_zero);
  const auto w = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t shl1_w = w + w;
  const std::uint32_t sign = w & 0x80000000u;
  std::uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const auto bits = std::bit_cast<std::uint32_t>(base);
  const std::uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const std::uint32_t mantissa_bits = bits & 0x00000FFFu;
  const std::uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

/// bfloat16 -> float (exact: the 16 bits become the top of the float).
[[nodiscard]] inline float bf16_to_fp32(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// Float -> bfloat16 as ggml_compute_fp32_to_bf16: round to nearest even; a NaN keeps its top 16
/// bits with the quiet bit forced on.
[[nodiscard]] inline std::uint16_t fp32_to_bf16(float f) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 64u);
  return static_cast<std::uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace ember::inline EMBER_ISA::detail

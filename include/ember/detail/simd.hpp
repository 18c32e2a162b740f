/// The row kernels out = w · s + p used by every fused path, in portable, AVX and AVX-512 forms
/// with cached or streaming stores. Each form rounds w · s before adding p (detail::rounded), so
/// every fused path gives the bits of a lookup followed by a separate add.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/types.hpp"

// 1 where the AVX and AVX-512 row kernels below are compiled (x86 GCC and clang, with target
// attributes, whatever the build targets); with_row_policy picks one only where the build targets
// that instruction set.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define EMBER_DETAIL_HAVE_AVX_ROWS 1
#else
#define EMBER_DETAIL_HAVE_AVX_ROWS 0
#endif

namespace ember::inline EMBER_ISA::detail {

/// Output size (bytes) from which a fused lookup writes with non-temporal (streaming) stores: the
/// L2 of a core on the machines ember is measured on (2 MiB). Below it the output stays in cache
/// for its next reader; above it ordinary stores pay a read-for-ownership of every output line
/// that is evicted anyway.
inline constexpr Index kStreamMinBytes = Index{2} << 20;

/// o[c] = rounded(x(c) · a) + b(c) for c in [0, d): chunks of 16 products rounded together, so
/// both loops of a chunk vectorise (the portable form of a product rounded before its add).
template <class T, class X, class B>
EMBER_ALWAYS_INLINE void times_plus(Index d, X x, T a, B b, T* o) noexcept {
  constexpr Index chunk = 16;
  Index c = 0;
  for (; c + chunk <= d; c += chunk) {
    T prod[chunk];
    for (Index k = 0; k < chunk; ++k) prod[k] = x(c + k) * a;
    rounded(std::span<T>(prod));
    for (Index k = 0; k < chunk; ++k) o[c + k] = prod[k] + b(c + k);
  }
  for (; c < d; ++c) o[c] = rounded(x(c) * a) + b(c);
}

/// Row policy: the portable loop (times_plus).
struct PlainRows {};

template <class T>
inline void scaled_add_row(PlainRows, const T* w, const T* p, T s, T* o, Index d) noexcept {
  times_plus(
      d, [w](Index c) { return w[c]; }, s, [p](Index c) { return p[c]; }, o);
}

#if EMBER_DETAIL_HAVE_AVX_ROWS
#define EMBER_DETAIL_TARGET_AVX __attribute__((target("avx")))
#define EMBER_DETAIL_TARGET_AVX512 __attribute__((target("avx512f")))

/// Row policy: 256-bit AVX, product rounded before the add, with ordinary stores or (Stream) the
/// 32-byte aligned body of each row stored non-temporally; a chunk of streamed rows ends with
/// stream_fence().
template <bool Stream>
struct AvxRowsT {};
using AvxRows = AvxRowsT<false>;
using AvxStreamRows = AvxRowsT<true>;

/// Row policy: as AvxRowsT with 512-bit vectors (streaming stores then 64-byte aligned: one whole
/// cache line each), used instead of AvxRowsT when the build targets AVX-512F.
template <bool Stream>
struct Avx512RowsT {};
using Avx512Rows = Avx512RowsT<false>;
using Avx512StreamRows = Avx512RowsT<true>;

/// rounded() for the vectors of the kernels below, which a unit built without AVX compiles under
/// target attributes only (the template would pass them by value without AVX).
EMBER_DETAIL_TARGET_AVX inline __m256 rounded(__m256 x) noexcept {
  asm("" : "+x"(x));
  return x;
}
EMBER_DETAIL_TARGET_AVX inline __m256d rounded(__m256d x) noexcept {
  asm("" : "+x"(x));
  return x;
}
EMBER_DETAIL_TARGET_AVX512 inline __m512 rounded(__m512 x) noexcept {
  asm("" : "+v"(x));
  return x;
}
EMBER_DETAIL_TARGET_AVX512 inline __m512d rounded(__m512d x) noexcept {
  asm("" : "+v"(x));
  return x;
}

/// Orders this thread's non-temporal stores before anything it does next (e.g. leaving the
/// parallel region whose join publishes the output).
EMBER_DETAIL_TARGET_AVX inline void stream_fence() noexcept { _mm_sfence(); }

template <class T>
EMBER_DETAIL_TARGET_AVX inline void scaled_add_scalars(const T* w, const T* p, T s, T* o,
                                                       Index begin, Index end) noexcept {
  for (Index c = begin; c < end; ++c) o[c] = rounded(w[c] * s) + p[c];
}

EMBER_DETAIL_TARGET_AVX inline __m256 scaled_add8(const float* w, const float* p,
                                                  __m256 s) noexcept {
  return _mm256_add_ps(rounded(_mm256_mul_ps(_mm256_loadu_ps(w), s)), _mm256_loadu_ps(p));
}

EMBER_DETAIL_TARGET_AVX inline __m256d scaled_add8(const double* w, const double* p,
                                                   __m256d s) noexcept {
  return _mm256_add_pd(rounded(_mm256_mul_pd(_mm256_loadu_pd(w), s)), _mm256_loadu_pd(p));
}

EMBER_DETAIL_TARGET_AVX inline __m256 broadcast(float s) noexcept { return _mm256_set1_ps(s); }
EMBER_DETAIL_TARGET_AVX inline __m256d broadcast(double s) noexcept { return _mm256_set1_pd(s); }
EMBER_DETAIL_TARGET_AVX inline void store(float* o, __m256 v) noexcept { _mm256_storeu_ps(o, v); }
EMBER_DETAIL_TARGET_AVX inline void store(double* o, __m256d v) noexcept { _mm256_storeu_pd(o, v); }
EMBER_DETAIL_TARGET_AVX inline void stream(float* o, __m256 v) noexcept { _mm256_stream_ps(o, v); }
EMBER_DETAIL_TARGET_AVX inline void stream(double* o, __m256d v) noexcept {
  _mm256_stream_pd(o, v);
}

/// First element of o at a `bytes`-aligned address, capped at d: the head a streaming row path
/// writes with ordinary stores.
template <class T>
inline Index aligned_head(const T* o, Index d, Index bytes) noexcept {
  const auto misalign =
      static_cast<Index>(reinterpret_cast<std::uintptr_t>(o) % static_cast<std::uintptr_t>(bytes));
  const Index head = misalign == 0 ? 0 : (bytes - misalign) / static_cast<Index>(sizeof(T));
  return head < d ? head : d;
}

template <bool Stream, class T>
EMBER_DETAIL_TARGET_AVX inline void scaled_add_row(AvxRowsT<Stream>, const T* w, const T* p, T s,
                                                   T* o, Index d) noexcept {
  constexpr Index lanes = 32 / static_cast<Index>(sizeof(T));
  const Index head = Stream ? aligned_head(o, d, 32) : 0;
  scaled_add_scalars(w, p, s, o, 0, head);
  const auto sv = broadcast(s);
  Index c = head;
  for (; c + lanes <= d; c += lanes) {
    if constexpr (Stream) {
      stream(o + c, scaled_add8(w + c, p + c, sv));
    } else {
      store(o + c, scaled_add8(w + c, p + c, sv));
    }
  }
  scaled_add_scalars(w, p, s, o, c, d);
}

EMBER_DETAIL_TARGET_AVX512 inline __m512 scaled_add16(const float* w, const float* p,
                                                      __m512 s) noexcept {
  return _mm512_add_ps(rounded(_mm512_mul_ps(_mm512_loadu_ps(w), s)), _mm512_loadu_ps(p));
}

EMBER_DETAIL_TARGET_AVX512 inline __m512d scaled_add16(const double* w, const double* p,
                                                       __m512d s) noexcept {
  return _mm512_add_pd(rounded(_mm512_mul_pd(_mm512_loadu_pd(w), s)), _mm512_loadu_pd(p));
}

EMBER_DETAIL_TARGET_AVX512 inline __m512 broadcast512(float s) noexcept {
  return _mm512_set1_ps(s);
}
EMBER_DETAIL_TARGET_AVX512 inline __m512d broadcast512(double s) noexcept {
  return _mm512_set1_pd(s);
}
EMBER_DETAIL_TARGET_AVX512 inline void store(float* o, __m512 v) noexcept {
  _mm512_storeu_ps(o, v);
}
EMBER_DETAIL_TARGET_AVX512 inline void store(double* o, __m512d v) noexcept {
  _mm512_storeu_pd(o, v);
}
EMBER_DETAIL_TARGET_AVX512 inline void stream(float* o, __m512 v) noexcept {
  _mm512_stream_ps(o, v);
}
EMBER_DETAIL_TARGET_AVX512 inline void stream(double* o, __m512d v) noexcept {
  _mm512_stream_pd(o, v);
}

template <bool Stream, class T>
EMBER_DETAIL_TARGET_AVX512 inline void scaled_add_row(Avx512RowsT<Stream>, const T* w, const T* p,
                                                      T s, T* o, Index d) noexcept {
  constexpr Index lanes = 64 / static_cast<Index>(sizeof(T));
  const Index head = Stream ? aligned_head(o, d, 64) : 0;
  scaled_add_scalars(w, p, s, o, 0, head);
  const auto sv = broadcast512(s);
  Index c = head;
  for (; c + lanes <= d; c += lanes) {
    if constexpr (Stream) {
      stream(o + c, scaled_add16(w + c, p + c, sv));
    } else {
      store(o + c, scaled_add16(w + c, p + c, sv));
    }
  }
  scaled_add_scalars(w, p, s, o, c, d);
}
#else
/// stream_fence where no row policy streams: nothing to order.
inline void stream_fence() noexcept {}
#endif

namespace portable {

/// codes_times_plus in plain loops (times_plus).
inline void codes_times_plus(const std::uint8_t* q, Index d, float a, float b,
                             float* dst) noexcept {
  times_plus(
      d, [q](Index k) { return static_cast<float>(q[k]); }, a, [b](Index) { return b; }, dst);
}

}  // namespace portable

#if EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX2__)
namespace avx2 {

/// codes_times_plus in 256-bit vectors, the rest by portable::codes_times_plus.
inline void codes_times_plus(const std::uint8_t* q, Index d, float a, float b,
                             float* dst) noexcept {
  Index c = 0;
  const __m256 va = _mm256_set1_ps(a);
  const __m256 vb = _mm256_set1_ps(b);
  for (; c + 8 <= d; c += 8) {
    const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + c));
    const __m256 prod = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes)), va);
    _mm256_storeu_ps(dst + c, _mm256_add_ps(rounded(prod), vb));
  }
  portable::codes_times_plus(q + c, d - c, a, b, dst + c);
}

}  // namespace avx2
#endif

#if EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX512F__)
namespace avx512 {

/// codes_times_plus in 512-bit vectors, the rest by portable::codes_times_plus.
inline void codes_times_plus(const std::uint8_t* q, Index d, float a, float b,
                             float* dst) noexcept {
  Index c = 0;
  const __m512 va = _mm512_set1_ps(a);
  const __m512 vb = _mm512_set1_ps(b);
  for (; c + 16 <= d; c += 16) {
    const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c));
    // The zero-masked forms with every lane kept are the same instructions; the unmasked
    // intrinsics start from _mm512_undefined_*(), which GCC 12 reports as maybe-uninitialized
    // once inlined (a false positive, fatal for users building with -Werror).
    const __m512i ints = _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF}, codes);
    const __m512 prod = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, ints), va);
    _mm512_storeu_ps(dst + c, _mm512_add_ps(rounded(prod), vb));
  }
  portable::codes_times_plus(q + c, d - c, a, b, dst + c);
}

}  // namespace avx512
#endif

/// dst[c] = float(q[c]) · a + b for c < d, the product rounded before the add in every build: one
/// pass in the widest vectors the build targets, the rest by times_plus.
/// Signature: codes_times_plus(const std::uint8_t* q, Index d, float a, float b, float* dst).
#if EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX512F__)
using avx512::codes_times_plus;
#elif EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX2__)
using avx2::codes_times_plus;
#else
using portable::codes_times_plus;
#endif

/// True for the row policies whose stores are non-temporal (a chunk ends with stream_fence()).
template <class Rows>
inline constexpr bool is_streaming_rows = false;
#if EMBER_DETAIL_HAVE_AVX_ROWS
template <>
inline constexpr bool is_streaming_rows<AvxStreamRows> = true;
template <>
inline constexpr bool is_streaming_rows<Avx512StreamRows> = true;
#endif

/// This build's row policies, with ordinary and with streaming stores: AVX-512 or AVX when
/// targeted, the portable loop (which has no streaming form) otherwise.
#if EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX512F__)
using BuildRows = Avx512Rows;
using BuildStreamRows = Avx512StreamRows;
#elif EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX__)
using BuildRows = AvxRows;
using BuildStreamRows = AvxStreamRows;
#else
using BuildRows = PlainRows;
using BuildStreamRows = PlainRows;
#endif

/// Calls f(policy) with this build's row policy for an output of `bytes` bytes: the streaming
/// one from kStreamMinBytes, where the build has one.
template <class F>
EMBER_ALWAYS_INLINE void with_row_policy(Index bytes, F&& f) {
  if constexpr (std::is_same_v<BuildRows, BuildStreamRows>) {
    static_cast<void>(bytes);
    f(BuildRows{});
  } else if (bytes >= kStreamMinBytes) {
    f(BuildStreamRows{});
  } else {
    f(BuildRows{});
  }
}

}  // namespace ember::inline EMBER_ISA::detail

// Internal to this header (nlohmann/json's macro_unscope habit): users and later headers never
// see them.
#undef EMBER_DETAIL_TARGET_AVX
#undef EMBER_DETAIL_TARGET_AVX512

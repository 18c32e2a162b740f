/// Gather kernels: copy table rows selected by ids into an output, scaled, optionally adding a
/// positional row in the same pass. Inputs were validated by the public caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

namespace ember::detail {

/// How many rows ahead the gather kernels prefetch the table row of a later id. Rows are picked
/// at random, so the hardware prefetcher cannot guess the next one; a couple of rows of lead hides
/// most of a cold row's latency without flooding the fill buffers.
inline constexpr Index kGatherPrefetchRows = 2;

/// Plain reference of gather_scaled, kept beside the fast kernel and tested against it.
template <class T, class Id>
void gather_scaled_reference(ConstTableRef<T> table, std::span<const Id> ids, T scale,
                             TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    for (Index c = 0; c < table.cols; ++c) out.row(i)[c] = table.row(id)[c] * scale;
  }
}

/// ids[n], table[V, d] -> out[n, d]: out[i] = table[ids[i]] * scale.
/// Validated by Embedding::forward (ids in [0, V), out n x d).
/// Rows are independent, so any thread split gives the same bits; small n never enters OpenMP.
template <class T, class Id>
void gather_scaled(ConstTableRef<T> table, std::span<const Id> ids, T scale, TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d);
  const Id* id_data = ids.data();
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    for (Index i = begin; i < end; ++i) {
      if (i + kGatherPrefetchRows < end) {
        prefetch_row(table.row(static_cast<Index>(id_data[i + kGatherPrefetchRows])), d);
      }
      const auto id = static_cast<Index>(id_data[i]);
      EMBER_ASSERT(id >= 0 && id < table.rows);
      Eigen::Map<RowVector<T>>(out.row(i), d) =
          Eigen::Map<const RowVector<T>>(table.row(id), d) * scale;
    }
  });
}

/// Plain reference of gather_scaled_add, kept beside the fast kernel and tested against it.
template <class T, class Id>
void gather_scaled_add_reference(ConstTableRef<T> table, std::span<const Id> ids, T scale,
                                 ConstTableRef<T> pe, Index seq_len, Index offset,
                                 TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    const Index p = offset + i % seq_len;
    for (Index c = 0; c < table.cols; ++c) {
      const T scaled = table.row(id)[c] * scale;  // rounded before the add, as in the fast kernel
      out.row(i)[c] = scaled + pe.row(p)[c];
    }
  }
}

/// Output size (bytes) from which gather_scaled_add writes with non-temporal (streaming) stores:
/// the L2 of a core on the machines ember is measured on (2 MiB). Below it the output will still
/// be in cache for whoever reads it next, so ordinary stores win; above it ordinary stores pay a
/// read-for-ownership of every output line that is then evicted anyway.
inline constexpr Index kStreamMinBytes = Index{2} << 20;

/// How many rows ahead gather_scaled_add prefetches the table row of a later id (the fused
/// kernel's own knob; gather_scaled keeps kGatherPrefetchRows).
inline constexpr Index kFusedPrefetchRows = 2;

/// Row policy of gather_scaled_add_rows: the Eigen expression, ordinary stores. The portable
/// path; on targets whose compiler contracts `w·s + p` into an FMA (e.g. aarch64) it differs
/// from the unfused path by that one rounding.
struct PlainRows {};

template <class T>
inline void scaled_add_row(PlainRows, const T* w, const T* p, T s, T* o, Index d) noexcept {
  Eigen::Map<RowVector<T>>(o, d) =
      Eigen::Map<const RowVector<T>>(w, d) * s + Eigen::Map<const RowVector<T>>(p, d);
}

/// The AVX row kernels exist on x86 with GCC or Clang whatever the -m flags: they carry
/// target("avx") themselves, so tests can run them on an AVX machine from a baseline build.
/// gather_scaled_add only dispatches to them when the build itself targets AVX (__AVX__).
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_DETAIL_HAVE_AVX_ROWS 1
#define EMBER_DETAIL_TARGET_AVX __attribute__((target("avx")))

/// Keeps the scalar `v` in an SSE register the compiler cannot see through, so `w·s` is rounded
/// before `+ p` even where the compiler would contract the two into one FMA (GCC does by default
/// in C++). That makes the AVX row paths bit-identical to forward followed by add_to in every
/// build. (The vector row functions spell the same empty asm on their 256/512-bit operands.)
template <class T>
inline void no_contract(T& v) noexcept {
  asm("" : "+x"(v));
}

/// Row policy: 256-bit AVX, product rounded before the add. Stream = false: ordinary (cached)
/// stores. Stream = true: the 32-byte aligned body of each row goes out with non-temporal stores
/// (_mm256_stream_ps/pd), the unaligned head and tail with ordinary ones; whoever runs a chunk of
/// rows with it ends the chunk with stream_fence().
template <bool Stream>
struct AvxRowsT {};
using AvxRows = AvxRowsT<false>;
using AvxStreamRows = AvxRowsT<true>;

/// Orders this thread's non-temporal stores before anything it does next (e.g. leaving the
/// parallel region whose join publishes the output).
EMBER_DETAIL_TARGET_AVX inline void stream_fence() noexcept { _mm_sfence(); }

template <class T>
EMBER_DETAIL_TARGET_AVX inline void scaled_add_scalars(const T* w, const T* p, T s, T* o,
                                                       Index begin, Index end) noexcept {
  for (Index c = begin; c < end; ++c) {
    T prod = w[c] * s;
    no_contract(prod);
    o[c] = prod + p[c];
  }
}

EMBER_DETAIL_TARGET_AVX inline __m256 scaled_add8(const float* w, const float* p,
                                                  __m256 s) noexcept {
  __m256 prod = _mm256_mul_ps(_mm256_loadu_ps(w), s);
  asm("" : "+x"(prod));  // no_contract, spelled here: a 256-bit operand needs this AVX target
  return _mm256_add_ps(prod, _mm256_loadu_ps(p));
}

EMBER_DETAIL_TARGET_AVX inline __m256d scaled_add8(const double* w, const double* p,
                                                   __m256d s) noexcept {
  __m256d prod = _mm256_mul_pd(_mm256_loadu_pd(w), s);
  asm("" : "+x"(prod));
  return _mm256_add_pd(prod, _mm256_loadu_pd(p));
}

EMBER_DETAIL_TARGET_AVX inline __m256 broadcast(float s) noexcept { return _mm256_set1_ps(s); }
EMBER_DETAIL_TARGET_AVX inline __m256d broadcast(double s) noexcept { return _mm256_set1_pd(s); }
EMBER_DETAIL_TARGET_AVX inline void store(float* o, __m256 v) noexcept { _mm256_storeu_ps(o, v); }
EMBER_DETAIL_TARGET_AVX inline void store(double* o, __m256d v) noexcept { _mm256_storeu_pd(o, v); }
EMBER_DETAIL_TARGET_AVX inline void stream(float* o, __m256 v) noexcept { _mm256_stream_ps(o, v); }
EMBER_DETAIL_TARGET_AVX inline void stream(double* o, __m256d v) noexcept {
  _mm256_stream_pd(o, v);
}

/// First element of o at or after a `bytes`-aligned address, capped at d (an element-aligned o
/// reaches one, since bytes is a multiple of sizeof(T)): the head a streaming row path writes
/// with ordinary stores.
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

// The same two row paths with 512-bit vectors (64-byte aligned streaming stores: one whole
// cache line each), used instead of AvxRows/AvxStreamRows when the build targets AVX-512F.
// On rows already in L1 (decoding: a few ids per call) the kernel is bound by loads and stores
// per element, so halving the instruction count matters there.
#define EMBER_DETAIL_TARGET_AVX512 __attribute__((target("avx512f")))

/// Row policy: as AvxRowsT with 512-bit vectors (streaming stores then 64-byte aligned).
template <bool Stream>
struct Avx512RowsT {};
using Avx512Rows = Avx512RowsT<false>;
using Avx512StreamRows = Avx512RowsT<true>;

EMBER_DETAIL_TARGET_AVX512 inline __m512 scaled_add16(const float* w, const float* p,
                                                      __m512 s) noexcept {
  __m512 prod = _mm512_mul_ps(_mm512_loadu_ps(w), s);
  asm("" : "+v"(prod));  // no_contract for a 512-bit operand
  return _mm512_add_ps(prod, _mm512_loadu_ps(p));
}

EMBER_DETAIL_TARGET_AVX512 inline __m512d scaled_add16(const double* w, const double* p,
                                                       __m512d s) noexcept {
  __m512d prod = _mm512_mul_pd(_mm512_loadu_pd(w), s);
  asm("" : "+v"(prod));
  return _mm512_add_pd(prod, _mm512_loadu_pd(p));
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
#define EMBER_DETAIL_HAVE_AVX_ROWS 0
#endif

/// The loop of gather_scaled_add with the row policy `Rows` (PlainRows, AvxRows,
/// AvxStreamRows, Avx512Rows, Avx512StreamRows); every policy computes each element the same way,
/// so the choice never changes a bit of the result (PlainRows aside where the compiler contracts,
/// see there). Validated by embed_with_positions.
template <class Rows, class T, class Id>
void gather_scaled_add_rows(Rows rows, ConstTableRef<T> table, std::span<const Id> ids, T scale,
                            ConstTableRef<T> pe, Index seq_len, Index offset, TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d && pe.cols == d);
  EMBER_ASSERT(seq_len > 0 && offset >= 0 && offset + seq_len <= pe.rows);
  const Id* id_data = ids.data();
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    Index p = offset + begin % seq_len;  // position row of i, advanced without a division per row
    const Index p_end = offset + seq_len;
    for (Index i = begin; i < end; ++i) {
      if (i + kFusedPrefetchRows < end) {
        prefetch_row(table.row(static_cast<Index>(id_data[i + kFusedPrefetchRows])), d);
      }
      const auto id = static_cast<Index>(id_data[i]);
      EMBER_ASSERT(id >= 0 && id < table.rows);
      scaled_add_row(rows, table.row(id), pe.row(p), scale, out.row(i), d);
      if (++p == p_end) p = offset;
    }
#if EMBER_DETAIL_HAVE_AVX_ROWS
    if constexpr (std::is_same_v<Rows, AvxStreamRows> || std::is_same_v<Rows, Avx512StreamRows>) {
      stream_fence();
    }
#endif
  });
}

/// ids[n], table[V, d], pe[P, d] -> out[n, d]:
/// out[i] = table[ids[i]] * scale + pe[offset + i % seq_len]; one pass over each output row.
/// Validated by embed_with_positions (ids in range, seq_len > 0, n % seq_len == 0,
/// offset + seq_len <= P).
/// Built for AVX (AVX-512F: 512-bit vectors), the product is rounded before the sum
/// (bit-identical to gather_scaled followed by an add) and outputs of kStreamMinBytes or more are
/// written with non-temporal stores.
template <class T, class Id>
void gather_scaled_add(ConstTableRef<T> table, std::span<const Id> ids, T scale,
                       ConstTableRef<T> pe, Index seq_len, Index offset, TableRef<T> out) {
#if EMBER_DETAIL_HAVE_AVX_ROWS && defined(__AVX__)
  const auto bytes = static_cast<Index>(ids.size()) * table.cols * static_cast<Index>(sizeof(T));
#if defined(__AVX512F__)
  using Cached = Avx512Rows;
  using Streaming = Avx512StreamRows;
#else
  using Cached = AvxRows;
  using Streaming = AvxStreamRows;
#endif
  if (bytes >= kStreamMinBytes) {
    gather_scaled_add_rows(Streaming{}, table, ids, scale, pe, seq_len, offset, out);
  } else {
    gather_scaled_add_rows(Cached{}, table, ids, scale, pe, seq_len, offset, out);
  }
#else
  gather_scaled_add_rows(PlainRows{}, table, ids, scale, pe, seq_len, offset, out);
#endif
}

}  // namespace ember::detail

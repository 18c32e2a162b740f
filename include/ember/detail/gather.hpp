/// The one gather kernel of every lookup: decode the rows of ids from a table of any codec, scale
/// them, add position or segment rows, apply a dropout mask and store the result, in one pass per
/// output row. Inputs were validated by the public caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/simd.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// What a lookup adds to each scaled row i, all optional (a null data pointer is absent):
///   + positions[offset + i % seq_len]     (sinusoidal or learned position rows)
///   + segments[segment_ids[i]]            (segment_ids empty: segment 0 for every row)
///   then × keep[i·d + c] · keep_scale     (a dropout mask; kept elements scaled, others 0)
/// Each term is added to the rounded product of the previous step, so a fused lookup gives the
/// bits of forward followed by separate adds.
template <class V, class SegId = TokenId>
struct RowAddends {
  ConstTableRef<V> positions{nullptr, 0, 0, 0};
  Index seq_len = 1;
  Index offset = 0;
  ConstTableRef<V> segments{nullptr, 0, 0, 0};
  std::span<const SegId> segment_ids{};
  const std::uint8_t* keep = nullptr;
  V keep_scale = V(1);
};

/// The plain-table, positions-only loop of gather with a row policy `Rows` of simd.hpp:
/// out[i] = table[ids[i]] · scale + pe[offset + i % seq_len], one pass per row. Every policy
/// computes each element the same way, so the choice never changes a bit. Validated as gather.
template <class Rows, class T, class Id>
void scaled_add_rows(Rows rows, ConstTableRef<T> table, std::span<const Id> ids, T scale,
                     ConstTableRef<T> pe, Index seq_len, Index offset, TableRef<T> out,
                     Index ahead) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d && pe.cols == d);
  EMBER_ASSERT(seq_len > 0 && offset >= 0 && offset + seq_len <= pe.rows);
  const Id* id_data = ids.data();
  const Index row_bytes = d * static_cast<Index>(sizeof(T));
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    Index p = offset + begin % seq_len;  // position row of i, advanced without a division per row
    const Index p_end = offset + seq_len;
    for (Index i = begin; i < end; ++i) {
      if (i + ahead < end) {
        prefetch_row(table.row(static_cast<Index>(id_data[i + ahead])), row_bytes);
      }
      const auto id = static_cast<Index>(id_data[i]);
      EMBER_ASSERT(id >= 0 && id < table.rows);
      scaled_add_row(rows, table.row(id), pe.row(p), scale, out.row(i), d);
      if (++p == p_end) p = offset;
    }
    if constexpr (is_streaming_rows<Rows>) stream_fence();
  });
}

/// The per-row step of a bare lookup: nothing after the decode.
struct NoFinish {
  template <class V>
  EMBER_ALWAYS_INLINE void operator()(Index /*i*/, V* /*row*/) const noexcept {}
};

/// ids[n], table[V, d] (any codec) -> out[n, d]: out[i] = store(finish(i, decode(table[ids[i]]) ·
/// scale)), where finish(i, row) may change the decoded row in place (gather's addends) before it
/// is stored. Stream: the codec has decode_row_streaming (codec::StreamingDecode), which a bare
/// lookup of a large output uses. Validated as gather.
template <class O, bool Stream = false, class Codec, class Id, class Finish = NoFinish>
EMBER_ALWAYS_INLINE void lookup_rows(const CodecRows<Codec>& rows, std::span<const Id> ids,
                                     typename Codec::Value scale, TableRef<O> out,
                                     const Finish& finish = {}) {
  using V = typename Codec::Value;
  const auto n = static_cast<Index>(ids.size());
  const CodecRows<Codec> table = rows;  // a local copy: the loop reads no field through memory
  const Index d = table.d;
  const Index ahead = table.ahead();
  const Index row_bytes = table.row_bytes();
  const Id* id_data = ids.data();
  // A bare lookup whose codec can stream its decoded rows (Stream) does so for an output
  // of kStreamMinBytes or more, which would only evict itself from cache (a row that is not
  // 32-byte aligned goes out with ordinary stores). Its decoding takes long enough that the
  // hardware prefetchers never get ahead of a short row, so the whole of one of up to 4 KiB is
  // asked for.
  constexpr bool can_stream = EMBER_DETAIL_HAVE_AVX_ROWS && std::is_same_v<O, V> &&
                              std::is_same_v<Finish, NoFinish> && Stream;
  const bool stream = can_stream && n * d * static_cast<Index>(sizeof(V)) >= kStreamMinBytes;
  const Index head = stream && row_bytes <= 4096 ? row_bytes : kPrefetchHeadBytes;
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    // A row in the value type, for outputs stored in another type (none otherwise).
    [[maybe_unused]] std::conditional_t<std::is_same_v<O, V>, Index, RowVector<V>> scratch{};
    if constexpr (!std::is_same_v<O, V>) scratch.resize(d);
    for (Index i = begin; i < end; ++i) {
      if (i + ahead < end) {
        prefetch_row(table.row(static_cast<Index>(id_data[i + ahead])), row_bytes, head);
      }
      const auto id = static_cast<Index>(id_data[i]);
      EMBER_ASSERT(id >= 0 && id < table.rows);
      V* dst = nullptr;
      if constexpr (std::is_same_v<O, V>) {
        dst = out.row(i);
        if constexpr (can_stream) {
          if (stream && reinterpret_cast<std::uintptr_t>(dst) % 32 == 0) {
            table.codec.decode_row_streaming(table.row(id), d, scale, dst);
            continue;
          }
        }
      } else {
        dst = scratch.data();
      }
      table.decode(id, scale, dst);
      finish(i, dst);
      if constexpr (!std::is_same_v<O, V>) {
        Eigen::Map<RowVector<O>>(out.row(i), d) = scratch.template cast<O>();
      }
    }
    if (stream) stream_fence();
  });
}

/// ids[n], table[V, d] (any codec), addends -> out[n, d] (O = the codec's value type, or its
/// storage type rounded to nearest even):
///   out[i] = store( mask( decode(table[ids[i]]) · scale + positions + segments ) ).
/// Validated by the public lookups. Rows are independent, so any thread split gives the same bits.
///
/// A plain table with positions alone runs the one-pass row kernels of simd.hpp; every other
/// combination decodes the row into its output (or a scratch row) and adds each term in a pass of
/// its own (lookup_rows with those passes as its per-row step).
template <class O, class Codec, class Id, class SegId = TokenId>
void gather(const CodecRows<Codec>& table, std::span<const Id> ids, typename Codec::Value scale,
            const RowAddends<typename Codec::Value, SegId>& add, TableRef<O> out) {
  using V = typename Codec::Value;
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.d;
  EMBER_ASSERT(out.rows == n && out.cols == d);
  EMBER_ASSERT(add.positions.data == nullptr ||
               (add.positions.cols == d && add.seq_len > 0 && add.offset >= 0 &&
                add.offset + add.seq_len <= add.positions.rows));
  EMBER_ASSERT(add.segments.data == nullptr || add.segment_ids.empty() ||
               static_cast<Index>(add.segment_ids.size()) == n);

  if constexpr (Codec::is_plain && std::is_same_v<O, V>) {
    if (add.positions.data != nullptr && add.segments.data == nullptr &&
        add.keep == nullptr) {  // positions only
      const ConstTableRef<V> plain{table.data, table.rows, d, table.stride};
      with_row_policy(n * d * static_cast<Index>(sizeof(V)), [&](auto policy) {
        scaled_add_rows(policy, plain, ids, scale, add.positions, add.seq_len, add.offset, out,
                        table.ahead());
      });
      return;
    }
  }

  lookup_rows<O>(table, ids, scale, out, [&](Index i, V* dst) {
    // Plain loops, not Eigen's +=: Eigen's out-of-line assignment loops are shared by name
    // between units built for different instruction sets, which ember's namespace cannot tag.
    if (add.positions.data != nullptr) {
      const V* p = add.positions.row(add.offset + i % add.seq_len);
      for (Index c = 0; c < d; ++c) dst[c] += p[c];
    }
    if (add.segments.data != nullptr) {
      const Index s = add.segment_ids.empty()
                          ? 0
                          : static_cast<Index>(add.segment_ids[static_cast<std::size_t>(i)]);
      EMBER_ASSERT(s >= 0 && s < add.segments.rows);
      const V* seg = add.segments.row(s);
      for (Index c = 0; c < d; ++c) dst[c] += seg[c];
    }
    if (add.keep != nullptr) {
      const std::uint8_t* k = add.keep + i * d;
      for (Index c = 0; c < d; ++c) dst[c] = k[c] != 0 ? dst[c] * add.keep_scale : V(0);
    }
  });
}

/// gather with nothing added: lookup_rows (Stream as there).
template <class O, bool Stream = false, class Codec, class Id>
void gather(const CodecRows<Codec>& table, std::span<const Id> ids, typename Codec::Value scale,
            std::nullptr_t /*no addends*/, TableRef<O> out) {
  EMBER_ASSERT(out.rows == static_cast<Index>(ids.size()) && out.cols == table.d);
  lookup_rows<O, Stream>(table, ids, scale, out);
}

}  // namespace ember::inline EMBER_ISA::detail

// The plain reference of the gather kernel (detail/gather.hpp): every term of a lookup added
// element by element, in the kernel's order, for test_gather_kernels.cpp to compare it with.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <span>

#include <ember/detail/gather.hpp>
#include <ember/detail/table_ref.hpp>
#include <ember/types.hpp>

namespace ember_test {

using ember::Index;

/// Plain reference of detail::gather (segment ids of type TokenId), tested against the fast kernel:
/// the same operations in the same order, one element at a time.
template <class O, class Codec, class Id>
void gather_reference(const ember::detail::CodecRows<Codec>& table, std::span<const Id> ids,
                      typename Codec::Value scale,
                      const ember::detail::RowAddends<typename Codec::Value>& add,
                      ember::detail::TableRef<O> out) {
  using V = typename Codec::Value;
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.d;
  ember::RowVector<V> row(d);
  for (Index i = 0; i < n; ++i) {
    table.decode(static_cast<Index>(ids[static_cast<std::size_t>(i)]), scale, row.data());
    for (Index c = 0; c < d; ++c) {
      V v = row[c];
      if (add.positions.data != nullptr) {
        v = v + add.positions.row(add.offset + i % add.seq_len)[c];
      }
      if (add.segments.data != nullptr) {
        const Index s = add.segment_ids.empty()
                            ? 0
                            : static_cast<Index>(add.segment_ids[static_cast<std::size_t>(i)]);
        v = v + add.segments.row(s)[c];
      }
      if (add.keep != nullptr) v = add.keep[i * d + c] != 0 ? v * add.keep_scale : V(0);
      out.row(i)[c] = static_cast<O>(v);
    }
  }
}

/// gather_reference with nothing added.
template <class O, class Codec, class Id>
void gather_reference(const ember::detail::CodecRows<Codec>& table, std::span<const Id> ids,
                      typename Codec::Value scale, std::nullptr_t /*no addends*/,
                      ember::detail::TableRef<O> out) {
  gather_reference<O>(table, ids, scale, ember::detail::RowAddends<typename Codec::Value>{}, out);
}

}  // namespace ember_test

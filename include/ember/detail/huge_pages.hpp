/// An allocator for large arrays probed at random (a KeyIndex's records and slots): on Linux it
/// asks the kernel to back each large block with transparent huge pages before it is first
/// touched, so that probes spread over tens of megabytes rarely miss the TLB.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Asks for transparent huge pages over the 2 MiB-aligned part of [p, p + bytes) when that part is
/// at least 2 MiB and the block at least 4 MiB (madvise MADV_HUGEPAGE; the kernel may refuse, and
/// the memory is the same either way: only its page size changes). Nothing happens elsewhere.
inline void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t{1} << 21;
  if (p == nullptr || bytes < 2 * huge) return;
  // The first 2 MiB boundary at or after p, then whole huge pages up to the block's end.
  const std::size_t lead = (huge - reinterpret_cast<std::uintptr_t>(p) % huge) % huge;
  if (bytes <= lead) return;
  const std::size_t length = (bytes - lead) & ~(huge - 1);
  if (length > 0) static_cast<void>(madvise(static_cast<char*>(p) + lead, length, MADV_HUGEPAGE));
#else
  static_cast<void>(p);
  static_cast<void>(bytes);
#endif
}

/// std::allocator, with advise_huge_pages on every block it hands out (before the container
/// writes it, so the first touch already faults in huge pages). Stateless: all instances are
/// equal.
template <class T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  [[nodiscard]] T* allocate(std::size_t n) {
    T* p = std::allocator<T>{}.allocate(n);
    advise_huge_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>{}.deallocate(p, n); }

  template <class U>
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator<U>&) noexcept {
    return true;
  }
};

/// A vector whose large blocks are backed by huge pages where the system allows
/// (HugePageAllocator).
template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace ember::inline EMBER_ISA::detail

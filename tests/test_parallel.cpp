// Tests of detail/parallel.hpp: detail::parallel_rows' split and the serial fast path.
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <vector>

#include <ember/detail/parallel.hpp>

using Index = Eigen::Index;
namespace detail = ember::detail;

TEST_CASE("parallel_rows covers every index from 0 to n once, in disjoint chunks",
          "[config][kernels]") {
  for (const Index n : {Index{0}, Index{1}, Index{5}, Index{1000}}) {
    for (const Index work : {Index{1}, detail::kParallelMinWork * 4}) {
      std::vector<int> hits(static_cast<std::size_t>(n), 0);
      const int workers = detail::kernel_threads(work);  // asked outside the parallel region
      detail::parallel_rows(n, work, [&](Index begin, Index end, int worker) {
        CHECK(worker >= 0);
        CHECK(worker < workers);
        for (Index i = begin; i < end; ++i) ++hits[static_cast<std::size_t>(i)];
      });
      for (const int h : hits) CHECK(h == 1);
    }
  }
  CHECK(detail::kernel_threads(1) == 1);
}

TEST_CASE("small work never leaves the calling thread", "[config][kernels]") {
  CHECK(detail::kernel_threads(detail::kParallelMinWork - 1) == 1);
  int calls = 0;
  detail::parallel_rows(8, 8, [&](Index begin, Index end, int worker) {
    ++calls;
    CHECK(begin == 0);
    CHECK(end == 8);
    CHECK(worker == 0);
  });
  CHECK(calls == 1);
}

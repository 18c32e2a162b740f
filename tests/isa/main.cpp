// The ISA test: a program linking a unit built with -mavx512f (first on the link line) and one
// built without. It runs the baseline unit always and the AVX-512 unit only where the CPU has
// AVX-512F, and checks that the two units were compiled into different ember namespaces and
// computed the same bytes. Run under an emulated CPU without AVX-512 (qemu-x86_64 -cpu
// Haswell-v1), the baseline unit must run to the end: had the linker given it the AVX-512 unit's
// copies of ember's functions, it would die of SIGILL.
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <cstring>
#include <string>

#include "isa/isa_kernels.hpp"

int main() {
  const ember_test::IsaRun base = ember_test::run_baseline_unit();
  std::printf("baseline unit: %s, %zu bytes computed\n", base.isa.c_str(), base.bytes.size());
  if (base.bytes.empty()) return 1;
  if (__builtin_cpu_supports("avx512f") == 0) {
    std::printf("this CPU has no AVX-512F: the AVX-512 unit is not called\n");
    return 0;
  }
  const ember_test::IsaRun wide = ember_test::run_avx512_unit();
  std::printf("AVX-512 unit: %s, %zu bytes computed\n", wide.isa.c_str(), wide.bytes.size());
  if (wide.isa == base.isa) {
    std::printf("FAIL: both units share the namespace %s\n", base.isa.c_str());
    return 1;
  }
  if (wide.bytes.size() != base.bytes.size()) {
    std::printf("FAIL: the units computed %zu and %zu bytes\n", base.bytes.size(),
                wide.bytes.size());
    return 1;
  }
  for (std::size_t i = 0; i < base.bytes.size(); ++i) {
    if (base.bytes[i] != wide.bytes[i]) {
      std::printf("FAIL: the units' results differ first at byte %zu\n", i);
      return 1;
    }
  }
  std::printf("the two units computed the same %zu bytes\n", base.bytes.size());
  return 0;
}

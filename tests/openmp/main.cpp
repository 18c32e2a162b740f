// The mixed-OpenMP test: a program linking a unit built with OpenMP (first on the link line, at
// -O3) and one built without (-O2), run with OMP_NUM_THREADS=2 under AddressSanitizer. Both run
// the sparse backward and the fused steps; the test checks that the units were compiled into
// different ember namespaces and computed the same bytes. Had the linker given the serial unit
// the OpenMP unit's copy of a kernel while the serial unit sized that kernel's per-thread scratch
// for one thread, the second thread would write past it, which AddressSanitizer reports.
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <string>

#include "openmp/openmp_kernels.hpp"

int main() {
  const ember_test::OpenMpRun serial = ember_test::run_serial_unit();
  std::printf("serial unit: %s, %d thread(s), %zu bytes computed\n", serial.isa.c_str(),
              serial.threads, serial.bytes.size());
  const ember_test::OpenMpRun openmp = ember_test::run_openmp_unit();
  std::printf("OpenMP unit: %s, %d thread(s), %zu bytes computed\n", openmp.isa.c_str(),
              openmp.threads, openmp.bytes.size());
  if (openmp.threads != 2) {
    std::printf("FAIL: the OpenMP unit runs %d threads, expected 2 (OMP_NUM_THREADS=2)\n",
                openmp.threads);
    return 1;
  }
  if (openmp.isa == serial.isa) {
    std::printf("FAIL: both units share the namespace %s\n", serial.isa.c_str());
    return 1;
  }
  if (openmp.bytes.empty() || openmp.bytes.size() != serial.bytes.size()) {
    std::printf("FAIL: the units computed %zu and %zu bytes\n", openmp.bytes.size(),
                serial.bytes.size());
    return 1;
  }
  for (std::size_t i = 0; i < openmp.bytes.size(); ++i) {
    if (openmp.bytes[i] != serial.bytes[i]) {
      std::printf("FAIL: the units' results differ first at byte %zu\n", i);
      return 1;
    }
  }
  std::printf("the two units computed the same %zu bytes\n", openmp.bytes.size());
  return 0;
}

// The mixed-OpenMP test's unit built without OpenMP (see tests/CMakeLists.txt).
// SPDX-License-Identifier: MIT
#if defined(_OPENMP)
#error "serial_unit.cpp must be compiled without OpenMP"
#endif
#define EMBER_OPENMP_TEST_ENTRY run_serial_unit
#include "openmp/openmp_kernels.inc"

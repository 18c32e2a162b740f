// The mixed-OpenMP test's unit built with OpenMP (see tests/CMakeLists.txt).
// SPDX-License-Identifier: MIT
#if !defined(_OPENMP)
#error "openmp_unit.cpp must be compiled with OpenMP"
#endif
#define EMBER_OPENMP_TEST_ENTRY run_openmp_unit
#include "openmp/openmp_kernels.inc"

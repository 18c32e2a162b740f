// The ISA test's unit built with -mavx512f -mfma (see tests/CMakeLists.txt).
// SPDX-License-Identifier: MIT
#if !defined(__AVX512F__)
#error "isa_avx512.cpp must be compiled with -mavx512f"
#endif
#define EMBER_ISA_TEST_ENTRY run_avx512_unit
#include "isa/isa_kernels.inc"

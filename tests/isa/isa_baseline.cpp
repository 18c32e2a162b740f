// The ISA test's unit built with the program's own flags.
// SPDX-License-Identifier: MIT
#define EMBER_ISA_TEST_ENTRY run_baseline_unit
#include "isa/isa_kernels.inc"

// The ISA test (tests/isa): the same ember calls compiled in two translation units of one
// program, one built with -mavx512f and one without. Only standard types cross between them:
// ember types are per instruction set (config.hpp's EMBER_ISA).
// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace ember_test {

/// Everything one unit computed, as bytes, and the instruction-set tag it was compiled with.
struct IsaRun {
  std::string isa;
  std::vector<unsigned char> bytes;
};

/// The unit built with the program's baseline flags.
IsaRun run_baseline_unit();
/// The unit built with -mavx512f (call only on a machine that has AVX-512F).
IsaRun run_avx512_unit();

}  // namespace ember_test

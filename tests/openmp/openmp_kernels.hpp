// The mixed-OpenMP test (tests/openmp): the same ember calls compiled in two translation units of
// one program, one built with OpenMP and one without. Only standard types cross between them.
// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace ember_test {

/// Everything one unit computed, as bytes, with the namespace tag it was compiled with and the
/// OpenMP thread count it saw (1 in the unit built without OpenMP).
struct OpenMpRun {
  std::string isa;
  int threads = 1;
  std::vector<unsigned char> bytes;
};

/// The unit built with OpenMP (first on the link line).
OpenMpRun run_openmp_unit();
/// The unit built without OpenMP.
OpenMpRun run_serial_unit();

}  // namespace ember_test

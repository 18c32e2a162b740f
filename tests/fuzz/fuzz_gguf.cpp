// libFuzzer entry point for ember_fuzz::fuzz_gguf (tests/fuzz/harness.hpp).
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>

#include "fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember_fuzz::fuzz_gguf(data, size);
  return 0;
}

// libFuzzer entry point for ember_fuzz::fuzz_fasttext (tests/fuzz/fasttext_harness.hpp).
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>

#include "fuzz/fasttext_harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember_fuzz::fuzz_fasttext(data, size);
  return 0;
}

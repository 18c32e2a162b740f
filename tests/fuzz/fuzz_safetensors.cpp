// libFuzzer entry point for ember_fuzz::fuzz_safetensors (tests/fuzz/harness.hpp).
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>

#include "fuzz/harness.hpp"
#if !defined(EMBER_FUZZ_HAVE_IO)
#error "fuzz_safetensors needs ember::io (nlohmann_json)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember_fuzz::fuzz_safetensors(data, size);
  return 0;
}

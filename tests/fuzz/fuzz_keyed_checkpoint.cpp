// libFuzzer entry point for ember_fuzz::fuzz_keyed_checkpoint (tests/fuzz/harness.hpp).
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>

#include "fuzz/harness.hpp"
#if !defined(EMBER_FUZZ_HAVE_IO)
#error "fuzz_keyed_checkpoint needs ember::io (nlohmann_json)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember_fuzz::fuzz_keyed_checkpoint(data, size);
  return 0;
}

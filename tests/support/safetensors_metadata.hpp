// Test helper for the files ember writes as safetensors (io/safetensors.hpp and the checkpoints
// built on it): rewrites one __metadata__ entry of a saved file, tensors and data untouched, to
// corrupt a field that ember's writers never get wrong. Needs nlohmann/json (ember::io).
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ember_test {

/// Rewrites the safetensors file at `path` with __metadata__[key] set to `value` (erased for
/// std::nullopt). The header is re-serialized and padded with spaces to a multiple of 8 bytes;
/// data offsets are relative to the data section, so they stay valid. Self-contained (no
/// io_files.hpp, whose fixtures need EMBER_TEST_DATA_DIR): the MPI tests use it too.
inline void set_safetensors_metadata(const std::string& path, const std::string& key,
                                     const std::optional<std::string>& value) {
  std::vector<unsigned char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::uint64_t n = 0;
  if (bytes.size() < 8) throw std::runtime_error("set_safetensors_metadata: not safetensors");
  std::memcpy(&n, bytes.data(), 8);  // little-endian host
  if (n > bytes.size() - 8) throw std::runtime_error("set_safetensors_metadata: bad header size");
  const auto header_end = bytes.begin() + static_cast<std::ptrdiff_t>(8 + n);
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.begin() + 8, header_end);
  if (value) {
    header["__metadata__"][key] = *value;
  } else if (header.contains("__metadata__")) {
    header["__metadata__"].erase(key);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t length = text.size();
  unsigned char prefix[8];
  std::memcpy(prefix, &length, 8);  // little-endian host
  const auto rest = static_cast<std::streamsize>(bytes.end() - header_end);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(prefix), 8);
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.write(reinterpret_cast<const char*>(bytes.data()) + 8 + n, rest);
  if (!file) throw std::runtime_error("set_safetensors_metadata: cannot write " + path);
}

}  // namespace ember_test

// Test helpers for ember's loaders: a scratch directory, raw byte files, golden fixtures, the
// FileError of a missing file.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/errors.hpp>

namespace ember_test {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("ember_test_" + std::to_string(rd()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  [[nodiscard]] std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path_),
                                                  std::filesystem::directory_iterator{}));
  }

 private:
  std::filesystem::path path_;
};

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::vector<unsigned char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

inline void append(std::vector<unsigned char>& v, const std::vector<unsigned char>& more) {
  v.insert(v.end(), more.begin(), more.end());
}

/// Little-endian bytes of a trivially copyable value (the host is little-endian).
template <class V>
std::vector<unsigned char> le_bytes(V value) {
  std::vector<unsigned char> b(sizeof(V));
  std::memcpy(b.data(), &value, sizeof(V));
  return b;
}

/// Appends the little-endian bytes of value to v.
template <class V>
void append_le(std::vector<unsigned char>& v, V value) {
  append(v, le_bytes(value));
}

/// The little-endian bytes of the floats in v.
inline std::vector<unsigned char> float_bytes(std::initializer_list<float> v) {
  std::vector<unsigned char> b;
  for (float f : v) append_le(b, f);
  return b;
}

inline std::string data_file(const std::string& name) {
  return std::string(EMBER_TEST_DATA_DIR) + "/" + name;
}

/// Calls `load(path)` on a path that does not exist and checks the FileError it must throw: the
/// message names the public call `call`, the path and the system's reason, and the fields hold
/// the path, offset 0 and ENOENT.
template <class Load>
void check_missing_file(const std::string& call, Load&& load) {
  const ScratchDir dir;
  const std::string path = dir.file("does_not_exist.bin");
  try {
    load(path);
    FAIL(call << " opened a file that does not exist");
  } catch (const ember::FileError& e) {
    CHECK(std::string(e.what()) ==
          call + ": cannot open \"" + path + "\": No such file or directory");
    CHECK(e.path() == path);
    CHECK(e.offset() == 0);
    CHECK(e.code() == std::errc::no_such_file_or_directory);
  }
}

}  // namespace ember_test

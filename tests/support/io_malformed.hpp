// The malformed-file corpus of tests/test_malformed_files.cpp, for the loaders of io/ (npy,
// word2vec, GloVe, safetensors, vocabulary): valid files of every format ember reads, built in
// memory with their section boundaries, and the helpers that check a loader rejects a bad file
// with a FormatError naming the file and the byte offset or line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/errors.hpp>

#include "support/io_files.hpp"

namespace ember_test {

using Bytes = std::vector<unsigned char>;

inline Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) append(out, p);
  return out;
}

/// What a rejection must say. `offset` is the byte offset (is_line false) or the 1-based line.
struct Expect {
  Expect(std::string f, std::optional<std::uint64_t> o = std::nullopt, bool line = false)
      : fragment(std::move(f)), offset(o), is_line(line) {}
  Expect(const char* f, std::optional<std::uint64_t> o = std::nullopt, bool line = false)
      : Expect(std::string(f), o, line) {}
  std::string fragment;
  std::optional<std::uint64_t> offset;
  bool is_line = false;
};

/// Writes `bytes` to dir/name, runs `load(path)` and checks: a FormatError (not any other
/// exception, no crash), whose path() is the file, whose message names the file and contains
/// `expect.fragment`, and whose offset/line is `expect.offset` when given.
template <class Load>
void check_rejected(const ScratchDir& dir, const std::string& name, const Bytes& bytes,
                    const Expect& expect, Load&& load) {
  const std::string path = dir.file(name);
  write_bytes(path, bytes);
  INFO("file " << name << " (" << bytes.size() << " bytes), expecting '" << expect.fragment << "'");
  try {
    load(path);
    FAIL("the loader accepted " << name);
  } catch (const ember::FormatError& e) {
    INFO("message: " << e.what());
    CHECK(e.path() == path);
    CHECK_THAT(e.what(), Catch::StartsWith(path));
    CHECK_THAT(e.what(), Catch::Contains(expect.fragment));
    if (expect.offset) {
      CHECK(e.offset() == *expect.offset);
      CHECK(e.is_line() == expect.is_line);
    }
  }
}

/// For every prefix length k in [0, bytes.size()): the loader either throws a FormatError naming
/// the file with an offset <= k (bytes) or a line within the prefix, or (only when `may_succeed`)
/// loads. Returns how many prefixes were rejected.
template <class Load>
std::size_t check_every_truncation(const ScratchDir& dir, const std::string& name,
                                   const Bytes& bytes, bool may_succeed, Load&& load) {
  const std::string path = dir.file(name);
  std::size_t rejected = 0;
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    write_bytes(path, Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(k)));
    try {
      load(path);
      if (!may_succeed) FAIL_CHECK(name << " truncated to " << k << " bytes was accepted");
    } catch (const ember::FormatError& e) {
      ++rejected;
      if (e.path() != path) FAIL_CHECK("FormatError names " << e.path() << ", not " << path);
      if (!e.is_line() && e.offset() > k) {
        FAIL_CHECK(name << " truncated to " << k << " bytes: offset " << e.offset()
                        << " is past the end: " << e.what());
      }
    }
  }
  return rejected;
}

}  // namespace ember_test

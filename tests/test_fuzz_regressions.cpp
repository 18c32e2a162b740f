// Replays, as ordinary tests under every compiler and sanitizer build, the inputs of the fuzz
// harnesses (tests/fuzz/harness.hpp): the seed corpus tests/fuzz/corpus/<harness>/ and every crash,
// hang or contract-violation reproducer kept in tests/fuzz/regressions/<harness>/. Each input must
// run to completion: success or an ember exception, never another exception or a crash.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fuzz/fasttext_harness.hpp"
#include "fuzz/harness.hpp"
#include "support/io_files.hpp"

namespace {

using Harness = void (*)(const std::uint8_t*, std::size_t);

/// Files directly under dir (sorted, for a stable order); none when dir does not exist.
std::vector<std::filesystem::path> inputs_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().front() != '.') out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t replay(const std::string& name, Harness harness) {
  const std::filesystem::path root = EMBER_FUZZ_DIR;
  std::size_t n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    for (const auto& file : inputs_in(root / kind / name)) {
      INFO("replaying " << file.string());
      const auto bytes = ember_test::read_bytes(file.string());
      CHECK_NOTHROW(harness(bytes.data(), bytes.size()));
      ++n;
    }
  }
  // Every harness also gets the empty input and a few one-byte inputs.
  for (const int v : {0x00, 0x0a, 0x20, 0x7b, 0x93, 0xff}) {
    const auto b = static_cast<std::uint8_t>(v);
    CHECK_NOTHROW(harness(&b, 1));
  }
  CHECK_NOTHROW(harness(nullptr, 0));
  return n;
}

}  // namespace

TEST_CASE("fuzz inputs replay: npy", "[reliability][fuzz]") {
  CHECK(replay("npy", ember_fuzz::fuzz_npy) >= 5);
}
TEST_CASE("fuzz inputs replay: gguf", "[reliability][fuzz]") {
  CHECK(replay("gguf", ember_fuzz::fuzz_gguf) >= 4);
}
#if defined(EMBER_FUZZ_HAVE_IO)
TEST_CASE("fuzz inputs replay: safetensors", "[reliability][fuzz]") {
  CHECK(replay("safetensors", ember_fuzz::fuzz_safetensors) >= 3);
}
TEST_CASE("fuzz inputs replay: keyed checkpoints", "[reliability][fuzz]") {
  CHECK(replay("keyed_checkpoint", ember_fuzz::fuzz_keyed_checkpoint) >= 3);
}
#endif
TEST_CASE("fuzz inputs replay: word2vec binary", "[reliability][fuzz]") {
  CHECK(replay("w2v_binary", ember_fuzz::fuzz_w2v_binary) >= 3);
}
TEST_CASE("fuzz inputs replay: word2vec text", "[reliability][fuzz]") {
  CHECK(replay("w2v_text", ember_fuzz::fuzz_w2v_text) >= 2);
}
TEST_CASE("fuzz inputs replay: GloVe", "[reliability][fuzz]") {
  CHECK(replay("glove", ember_fuzz::fuzz_glove) >= 2);
}
TEST_CASE("fuzz inputs replay: vocabulary", "[reliability][fuzz]") {
  CHECK(replay("vocabulary", ember_fuzz::fuzz_vocabulary) >= 2);
}
TEST_CASE("fuzz inputs replay: fastText", "[reliability][fuzz]") {
  CHECK(replay("fasttext", ember_fuzz::fuzz_fasttext) >= 3);
}
TEST_CASE("fuzz inputs replay: the id path", "[reliability][fuzz]") {
  CHECK(replay("ids", ember_fuzz::fuzz_ids) >= 4);
}

TEST_CASE("the harnesses accept pseudo-random inputs of every length up to 300 bytes",
          "[reliability][fuzz]") {
  // A deterministic mini-fuzz for builds without libFuzzer (g++, ASan): random bytes, and the
  // seed files with one byte flipped at every position.
  std::vector<std::pair<std::string, Harness>> all = {
      {"npy", ember_fuzz::fuzz_npy},
      {"gguf", ember_fuzz::fuzz_gguf},
      {"w2v_binary", ember_fuzz::fuzz_w2v_binary},
      {"w2v_text", ember_fuzz::fuzz_w2v_text},
      {"glove", ember_fuzz::fuzz_glove},
      {"vocabulary", ember_fuzz::fuzz_vocabulary},
      {"ids", ember_fuzz::fuzz_ids},
      {"fasttext", ember_fuzz::fuzz_fasttext},
  };
#if defined(EMBER_FUZZ_HAVE_IO)
  all.emplace_back("safetensors", ember_fuzz::fuzz_safetensors);
#endif
  std::uint64_t x = 0x243f6a8885a308d3ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<std::uint8_t>(x >> 56);
  };
  const std::filesystem::path root = EMBER_FUZZ_DIR;
  for (const auto& [name, harness] : all) {
    INFO(name);
    for (std::size_t len = 0; len <= 300; len += 7) {
      std::vector<std::uint8_t> bytes(len);
      for (auto& b : bytes) b = next();
      CHECK_NOTHROW(harness(bytes.data(), bytes.size()));
    }
    const auto seeds = inputs_in(root / "corpus" / name);
    REQUIRE_FALSE(seeds.empty());
    auto seed = ember_test::read_bytes(seeds.front().string());
    for (std::size_t i = 0; i < seed.size(); ++i) {
      const unsigned char saved = seed[i];
      seed[i] = static_cast<unsigned char>(saved ^ next() ^ 0x01);
      CHECK_NOTHROW(harness(seed.data(), seed.size()));
      seed[i] = saved;
    }
  }
}

// Fault injection on save: every writer (npy, safetensors, GGUF, word2vec binary/text, GloVe,
// vocabulary) interrupted after k bytes for every k, failing at fsync or rename, writing into a
// full "disk" (RLIMIT_FSIZE), a missing directory, a path under a file and a read-only location.
// Each failure must be a FormatError naming the file, leave the previous file byte-identical and
// leave no temporary file behind.
#include <csignal>
#include <cstddef>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <catch2/catch.hpp>

#include "ember/io/detail/atomic_write.hpp"
#include "ember/io/gguf_writer.hpp"
#include "ember/io/npy.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/io/word2vec.hpp"
#if defined(EMBER_TEST_HAVE_IO)
#include "ember/io/safetensors.hpp"
#endif
#include "support/io_files.hpp"

using ember::detail::ScopedWriteFault;
using ember::detail::WriteFault;
using ember_test::ScratchDir;

namespace {

struct Saver {
  std::string name;
  std::function<void(const std::string&, int version)> save;  // version 0 = old, 1 = new
};

ember::RowMatrix<float> table(int version, ember::Index rows = 3, ember::Index cols = 4) {
  ember::RowMatrix<float> t(rows, cols);
  for (ember::Index i = 0; i < t.size(); ++i)
    t.data()[i] = static_cast<float>(i) * 0.5f + static_cast<float>(version) * 100.0f;
  return t;
}

ember::io::Vocabulary vocab(int version) {
  return ember::io::Vocabulary({"the", version == 0 ? "cat" : "dog", "café"});
}

std::vector<Saver> savers() {
  using ember::io::WordFormat;
  std::vector<Saver> s = {
      {"save_npy", [](const std::string& p, int v) { ember::io::save_npy(p, table(v)); }},
      {"save_word2vec_binary",
       [](const std::string& p, int v) {
         ember::io::save_word_vectors(p, WordFormat::word2vec_binary, vocab(v), table(v));
       }},
      {"save_word2vec_text",
       [](const std::string& p, int v) {
         ember::io::save_word_vectors(p, WordFormat::word2vec_text, vocab(v), table(v));
       }},
      {"save_glove",
       [](const std::string& p, int v) {
         ember::io::save_word_vectors(p, WordFormat::glove, vocab(v), table(v));
       }},
      {"save_vocabulary",
       [](const std::string& p, int v) { ember::io::save_vocabulary(p, vocab(v)); }},
      {"GgufWriter::save",
       [](const std::string& p, int v) {
         const auto q = table(v, 3, 64);
         const auto f = table(v);
         ember::io::GgufWriter w;
         w.metadata("general.architecture", "ember")
             .metadata("tokenizer.ggml.tokens", vocab(v).tokens())
             .add("token_embd.weight", q, ember::io::GgmlType::Q8_0)
             .add("output_norm.weight", f, ember::io::GgmlType::F32);
         w.save(p);
       }},
  };
#if defined(EMBER_TEST_HAVE_IO)
  s.push_back({"SafetensorsWriter::save", [](const std::string& p, int v) {
                 const auto t = table(v);
                 ember::io::SafetensorsWriter w;
                 w.add("wte.weight", t).alias("lm_head.weight", "wte.weight");
                 w.save(p);
               }});
#endif
  return s;
}

/// Restores RLIMIT_FSIZE and the SIGXFSZ disposition on scope exit.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("a save interrupted after k bytes, for every k, keeps the old file and reports it",
          "[reliability][io][atomic_write]") {
  for (const Saver& saver : savers()) {
    INFO(saver.name);
    ScratchDir dir;
    const std::string path = dir.file("model.bin");
    saver.save(path, 0);
    const auto old_bytes = ember_test::read_bytes(path);
    saver.save(dir.file("reference.bin"), 1);
    const auto new_bytes = ember_test::read_bytes(dir.file("reference.bin"));
    REQUIRE(new_bytes != old_bytes);
    const std::size_t entries = dir.entries();

    for (std::size_t k = 0; k < new_bytes.size(); ++k) {
      const ScopedWriteFault fault(WriteFault{.fail_after_bytes = k});
      try {
        saver.save(path, 1);
        FAIL_CHECK("the save succeeded although the writer failed after " << k << " bytes");
      } catch (const ember::FormatError& e) {
        CHECK(e.path() == path);
        CHECK(e.offset() == k);
        const std::string expected =
            path + ": write failed at byte " + std::to_string(k) + " (No space left on device)";
        if (e.what() != expected) FAIL_CHECK(e.what() << " != " << expected);
      }
      if (ember_test::read_bytes(path) != old_bytes) FAIL_CHECK("old file changed, k = " << k);
      if (dir.entries() != entries) FAIL_CHECK("a temporary file was left behind, k = " << k);
    }
    // A limit at or past the size does not trigger: the save goes through.
    {
      const ScopedWriteFault fault(WriteFault{.fail_after_bytes = new_bytes.size()});
      saver.save(path, 1);
    }
    CHECK(ember_test::read_bytes(path) == new_bytes);
    CHECK(dir.entries() == entries);
  }
}

TEST_CASE("a save failing at fsync or at the final rename keeps the old file",
          "[reliability][io][atomic_write]") {
  for (const Saver& saver : savers()) {
    INFO(saver.name);
    ScratchDir dir;
    const std::string path = dir.file("model.bin");
    saver.save(path, 0);
    const auto old_bytes = ember_test::read_bytes(path);
    for (const auto& step :
         {std::pair{WriteFault{.fail_fsync = true}, "cannot flush (fsync) temporary file"},
          std::pair{WriteFault{.fail_rename = true}, "cannot rename temporary file"}}) {
      // Not a structured binding: clang 14 cannot capture one in the lambda below.
      const char* const fragment = step.second;
      const ScopedWriteFault scoped(step.first);
      CHECK_THROWS_MATCHES(saver.save(path, 1), ember::FormatError,
                           Catch::Matchers::Predicate<ember::FormatError>(
                               [&](const ember::FormatError& e) {
                                 return e.path() == path &&
                                        std::string(e.what()).find(fragment) != std::string::npos;
                               },
                               fragment));
      CHECK(ember_test::read_bytes(path) == old_bytes);
      CHECK(dir.entries() == 1);
    }
  }
}

TEST_CASE("the fault seam is per thread and off outside its scope",
          "[reliability][io][atomic_write]") {
  ScratchDir dir;
  CHECK(ember::detail::active_write_fault == nullptr);
  {
    const ScopedWriteFault outer(WriteFault{.fail_after_bytes = 0});
    {
      const ScopedWriteFault inner(WriteFault{.fail_rename = true});
      CHECK(ember::detail::active_write_fault->fail_rename);
    }
    CHECK(ember::detail::active_write_fault->fail_after_bytes == 0);
    // Another thread saves normally while this one has a fault installed.
    std::thread other([&] { ember::io::save_npy(dir.file("other.npy"), table(0)); });
    other.join();
    CHECK_THROWS_AS(ember::io::save_npy(dir.file("mine.npy"), table(0)), ember::FormatError);
  }
  CHECK(ember::detail::active_write_fault == nullptr);
  CHECK(ember::io::load_npy<float>(dir.file("other.npy")) == table(0));
  ember::io::save_npy(dir.file("mine.npy"), table(0));
  CHECK(dir.entries() == 2);
}

TEST_CASE("a full disk (RLIMIT_FSIZE) makes every save fail cleanly and keep the old file",
          "[reliability][io][atomic_write]") {
  // A real kernel-side write failure, no test seam: with the file-size limit below the new file's
  // size, write() fails with EFBIG ("File too large") part-way, as it would with ENOSPC.
  for (const Saver& saver : savers()) {
    INFO(saver.name);
    ScratchDir dir;
    const std::string path = dir.file("model.bin");
    saver.save(path, 0);
    const auto old_bytes = ember_test::read_bytes(path);
    saver.save(dir.file("reference.bin"), 1);
    const std::size_t new_size = ember_test::read_bytes(dir.file("reference.bin")).size();
    {
      const FileSizeLimit limit(static_cast<rlim_t>(new_size / 2));
      try {
        saver.save(path, 1);
        FAIL_CHECK("saved past the file size limit");
      } catch (const ember::FormatError& e) {
        // The kernel writes up to the limit, then refuses: the offset is the limit.
        CHECK(std::string(e.what()) == path + ": write failed at byte " +
                                           std::to_string(new_size / 2) + " (File too large)");
        CHECK(e.offset() == new_size / 2);
      }
    }
    CHECK(ember_test::read_bytes(path) == old_bytes);
    CHECK(dir.entries() == 2);  // model.bin and reference.bin, no temporary
  }
}

TEST_CASE("saving into a missing directory, under a file or a read-only place is a FormatError",
          "[reliability][io][atomic_write]") {
  ScratchDir dir;
  const std::string file = dir.file("plain.txt");
  ember_test::write_text(file, "x");
  // /proc/self is read-only even for root (chmod cannot simulate that when the tests run as
  // root), so it stands in for a read-only mount.
  const std::vector<std::pair<std::string, std::string>> targets = {
      {dir.file("missing/model.bin"), "(No such file or directory)"},
      {file + "/model.bin", "(Not a directory)"},
      {"/proc/self/ember_model.bin", ""},
  };
  for (const Saver& saver : savers()) {
    for (const auto& [path, reason] : targets) {
      INFO(saver.name << " -> " << path);
      try {
        saver.save(path, 1);
        FAIL_CHECK("saved");
      } catch (const ember::FormatError& e) {
        CHECK(e.path() == path);
        CHECK_THAT(e.what(), Catch::StartsWith(path + ": cannot create temporary file at byte 0") &&
                                 Catch::Contains(reason));
      }
    }
  }
  CHECK(dir.entries() == 1);
  CHECK(ember_test::read_bytes(file) == ember_test::bytes_of("x"));
}

TEST_CASE("a failed save is a FileError with the system's error and the bytes written",
          "[reliability][io][atomic_write]") {
  ScratchDir dir;
  for (const Saver& saver : savers()) {
    INFO(saver.name);
    const std::string missing = dir.file("missing/model.bin");
    try {
      saver.save(missing, 1);
      FAIL_CHECK("saved");
    } catch (const ember::FileError& e) {
      CHECK(e.path() == missing);
      CHECK(e.offset() == 0);
      CHECK(e.code() == std::errc::no_such_file_or_directory);
    }
    const std::string path = dir.file("model.bin");
    const ScopedWriteFault fault(WriteFault{.fail_after_bytes = 5});
    try {
      saver.save(path, 1);
      FAIL_CHECK("saved");
    } catch (const ember::FileError& e) {
      CHECK(e.path() == path);
      CHECK(e.offset() == 5);
      CHECK(e.code() == std::errc::no_space_on_device);
    }
  }
}

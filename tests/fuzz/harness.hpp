// The bodies of ember's fuzz harnesses, shared by the libFuzzer binaries (tests/fuzz/fuzz_*.cpp)
// and by the ordinary Catch2 test that replays the seed corpus, every kept crash reproducer and
// the malformed-file corpus (tests/test_fuzz_regressions.cpp), so both run under g++, ASan and
// libFuzzer alike.
//
// Contract checked by every harness: whatever the bytes, the call either succeeds with a result
// that is consistent (sizes agree, values finite unless allowed) or throws an ember exception
// (ember::Error) whose message is not empty; a FormatError must name the file it was given. Any
// other exception (std::bad_alloc, std::length_error, nlohmann::json errors, ...) escapes:
// libFuzzer reports it as a crash, the Catch2 replay as a failure. Crashes, hangs, out-of-bounds
// reads and leaks are caught by the sanitizers. SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/input_embedding.hpp"
#include "ember/io/gguf.hpp"
#include "ember/io/npy.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/io/word2vec.hpp"
#include "ember/positional.hpp"
#include "ember/query/similarity.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/tied_logits.hpp"
#if defined(EMBER_FUZZ_HAVE_IO)
#include "ember/io/safetensors.hpp"
#include "ember/keys/keyed_checkpoint.hpp"
#include "ember/optim/adam.hpp"
#endif

namespace ember_fuzz {

/// A harness violated its contract (a wrong result, not an exception the library threw).
struct ContractViolation : std::logic_error {
  using std::logic_error::logic_error;
};

inline void require(bool ok, const char* what) {
  if (!ok) throw ContractViolation(std::string("ember fuzz contract violated: ") + what);
}

/// The input bytes as a file the path-based loaders can open: an in-memory memfd reached through
/// /proc/self/fd (no disk traffic), or a temporary file where memfd_create is unavailable. One
/// file per process, rewritten for every input.
class InputFile {
 public:
  static InputFile& instance() {
    static InputFile f;
    return f;
  }
  /// Replaces the file's contents with data[0, size) and returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0) fatal("ftruncate");
    std::size_t done = 0;
    while (done < size) {
      const ::ssize_t k = ::pwrite(fd_, data + done, size - done, static_cast<::off_t>(done));
      if (k <= 0) fatal("pwrite");
      done += static_cast<std::size_t>(k);
    }
    return path_;
  }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  InputFile() {
#if defined(__linux__)
    fd_ = ::memfd_create("ember_fuzz_input", MFD_CLOEXEC);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      if (::access(path_.c_str(), R_OK) == 0) return;
      ::close(fd_);
    }
#endif
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir != nullptr ? dir : "/tmp") + "/ember_fuzz_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    fd_ = ::mkstemp(buf.data());
    if (fd_ < 0) fatal("mkstemp");
    path_.assign(buf.data());
    unlink_ = true;
  }
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (unlink_) ::unlink(path_.c_str());
  }
  [[noreturn]] static void fatal(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_ = -1;
  std::string path_;
  bool unlink_ = false;
};

/// Checks what an ember exception says: a message, and for a FormatError the file's path.
inline void check_error(const ember::Error& e, const std::string& path) {
  require(e.message() != nullptr && e.message()[0] != '\0', "exception without a message");
  if (const auto* fe = dynamic_cast<const ember::FormatError*>(&e)) {
    require(fe->path() == path, "FormatError::path() is not the file that was loaded");
    require(std::string_view(fe->what()).find(path) != std::string_view::npos,
            "FormatError message does not name the file");
  }
}

/// Runs `f`; an ember exception is an accepted outcome (checked), anything else escapes.
template <class F>
void expect_ok_or_ember_error(const std::string& path, F&& f) {
  try {
    f();
  } catch (const ember::Error& e) {
    check_error(e, path);
  }
}

/// True when every value of the contiguous matrix `m` is finite. A plain loop over size(): Eigen's
/// allFinite() walks the outer dimension even when the other one is 0, which takes minutes on a
/// legal 0 x 2e9 table (the header "0 2000030000").
template <class M>
bool all_finite(const M& m) {
  const auto n = static_cast<std::size_t>(m.size());
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(m.data()[i])) return false;
  return true;
}

// ---- loaders --------------------------------------------------------------------------------

inline void fuzz_npy(const std::uint8_t* data, std::size_t size) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    const ember::io::NpyHeader h = ember::io::read_npy_header(path);
    const auto f = ember::io::load_npy<float>(path);
    require(f.rows() == h.rows && f.cols() == h.cols, "load_npy shape differs from the header");
    require(all_finite(f), "load_npy returned a non-finite value without allow_non_finite");
    const auto m = ember::io::map_npy<double>(path, {.allow_non_finite = true});
    require(m.vocab_size() == h.rows && m.d_model() == h.cols, "map_npy shape differs");
  });
  expect_ok_or_ember_error(path, [&] {
    const auto m = ember::io::map_npy<float>(path);
    require(all_finite(m.matrix()), "map_npy returned a non-finite value");
  });
}

#if defined(EMBER_FUZZ_HAVE_IO)
inline void fuzz_safetensors(const std::uint8_t* data, std::size_t size) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    const ember::io::SafetensorsFile file(path);
    std::vector<std::string> names = file.names();
    for (const auto& [alias, target] : file.aliases()) names.push_back(alias);
    for (const std::string& name : names) {
      require(file.contains(name), "a listed tensor is not contained");
      const auto& info = file.info(name);
      require(info.begin <= info.end, "offsets out of order");
      require(file.data_offset() + info.end <= size, "tensor data past the end of the file");
      expect_ok_or_ember_error(path, [&] {
        const auto t = file.load<float>(name);
        require(all_finite(t), "load returned a non-finite value");
        const auto m = file.map<double>(name, {.allow_non_finite = true});
        require(m.vocab_size() == t.rows() && m.d_model() == t.cols(), "map/load shapes differ");
      });
    }
  });
}
#endif

#if defined(EMBER_FUZZ_HAVE_IO)
/// A loaded keyed table is consistent: its keys on distinct rows below the capacity, found where
/// iteration says, finite rows; and it can map a batch (or refuse it with an ember exception).
template <class L>
void check_keyed(L& layer) {
  require(layer.table().vocab_size() == layer.capacity() + 1, "keyed table is not capacity + 1");
  require(layer.size() <= layer.index().key_capacity(), "more keys than rows");
  require(all_finite(layer.table().weight()), "keyed table holds a non-finite value");
  std::vector<std::uint64_t> keys;
  for (const ember::KeyEntry& e : layer.index()) {
    require(e.row >= 0 && e.row < layer.capacity(), "a key's row is outside the index");
    require(layer.index().find(e.key) == e.row, "find disagrees with iteration");
    require(e.count >= 1 && e.last_step <= layer.index().last_step(), "bad count or step");
    keys.push_back(e.key);
  }
  keys.push_back(0x0123456789ABCDEFULL);
  expect_ok_or_ember_error(std::string(), [&] {
    std::vector<double> scores(
        layer.options().index.policy == ember::EvictionPolicy::score ? keys.size() : 0, 1.0);
    const ember::KeyedBatch b =
        layer.map(keys, std::max<std::int64_t>(layer.index().last_step(), 0), scores);
    require(b.size() == static_cast<ember::Index>(keys.size()), "batch size");
  });
}

/// Loads a keyed checkpoint as each keyed layer, with and without an optimizer and into another
/// capacity; every load either succeeds with a consistent table or throws an ember exception.
inline void fuzz_keyed_checkpoint(const std::uint8_t* data, std::size_t size) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    auto emb = ember::load_keyed<float>(path);
    check_keyed(emb);
  });
  expect_ok_or_ember_error(path, [&] {
    ember::optim::Adam<float> adam;
    auto emb = ember::load_keyed<float>(path, &adam, {.capacity = 3});
    require(emb.capacity() == 3, "capacity not honoured");
    check_keyed(emb);
  });
  expect_ok_or_ember_error(path, [&] {
    auto bag = ember::load_keyed_bag<double>(path);
    check_keyed(bag);
  });
  expect_ok_or_ember_error(path, [&] {
    auto bags = ember::load_keyed_bags<float>(path);
    require(bags.num_tables() >= 1, "no tables");
  });
}
#endif

/// Reads every metadata value of a GGUF file through the typed getter of its stored type.
inline void read_gguf_value(const ember::io::GgufFile& file, const ember::io::GgufKeyInfo& k) {
  using T = ember::io::GgufValueType;
  auto scalar_or_array = [&](auto tag) {
    using V = decltype(tag);
    if (k.is_array()) {
      require(file.get<std::vector<V>>(k.key).size() == k.count, "array length differs");
    } else {
      (void)file.get<V>(k.key);
    }
  };
  switch (k.element_type) {
    case T::UINT8:
      scalar_or_array(std::uint8_t{});
      break;
    case T::INT8:
      scalar_or_array(std::int8_t{});
      break;
    case T::UINT16:
      scalar_or_array(std::uint16_t{});
      break;
    case T::INT16:
      scalar_or_array(std::int16_t{});
      break;
    case T::UINT32:
      scalar_or_array(std::uint32_t{});
      break;
    case T::INT32:
      scalar_or_array(std::int32_t{});
      break;
    case T::FLOAT32:
      scalar_or_array(float{});
      break;
    case T::BOOL:
      scalar_or_array(bool{});
      break;
    case T::STRING:
      scalar_or_array(std::string_view{});
      break;
    case T::UINT64:
      scalar_or_array(std::uint64_t{});
      break;
    case T::INT64:
      scalar_or_array(std::int64_t{});
      break;
    case T::FLOAT64:
      scalar_or_array(double{});
      break;
    default:
      require(false, "a value type outside 0..12 was accepted");
  }
}

/// The table view of one tensor: its first and last rows decode to load's values (times the scale,
/// NaN for NaN), and the logits of one hidden row have one entry per row.
inline void check_gguf_table(const ember::io::GgufFile& file, const ember::io::GgufTensorInfo& t) {
  const ember::GgmlEmbeddingView view = file.table(t.name, ember::LookupScale::none());
  require(view.vocab_size() == t.rows() && view.d_model() == t.cols(), "table shape differs");
  const auto all = file.load<float>(t.name, {.allow_non_finite = true});
  const std::vector<ember::Index> ids{0, t.rows() - 1};
  const auto rows = view.forward(ids);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (ember::Index c = 0; c < t.cols(); ++c) {
      const float a = rows(static_cast<ember::Index>(i), c);
      const float b = all(ids[i], c);
      require((std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0,
              "a table row differs from load's");
    }
  }
  const auto z = view.logits(ember::RowMatrix<float>::Ones(1, t.cols()));
  require(z.rows() == 1 && z.cols() == t.rows(), "logits shape differs");
}

/// Opens a GGUF file, reads every value, loads every tensor as float (checked) and double (NaN
/// allowed) and views it as a table; every tensor must lie inside the file, aligned, and its shape
/// match its load.
inline void fuzz_gguf(const std::uint8_t* data, std::size_t size) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    const ember::io::GgufFile file(path);
    require(file.version() == 2 || file.version() == 3, "a version other than 2 or 3 accepted");
    const std::uint64_t a = file.alignment();
    require(a != 0 && (a & (a - 1)) == 0, "alignment not a power of two");
    for (const auto& k : file.key_infos()) {
      require(k.offset <= size, "a value past the end of the file");
      read_gguf_value(file, k);
    }
    for (const auto& t : file.tensors()) {
      require(t.offset % a == 0, "tensor data misaligned");
      require(t.offset <= size && t.bytes <= size - t.offset, "tensor data past the end");
      require(file.bytes(t.name).size() == t.bytes, "bytes() size differs from the info");
      expect_ok_or_ember_error(path, [&] {
        const auto m = file.load<float>(t.name);
        require(m.rows() == t.rows() && m.cols() == t.cols(), "load shape differs from info");
        require(all_finite(m), "load returned a non-finite value");
      });
      expect_ok_or_ember_error(path, [&] {
        const auto m = file.load<double>(t.name, {.allow_non_finite = true});
        require(m.rows() == t.rows() && m.cols() == t.cols(), "load<double> shape differs");
      });
      expect_ok_or_ember_error(path, [&] { check_gguf_table(file, t); });
    }
    expect_ok_or_ember_error(path, [&] {
      const auto v = file.vocabulary();
      require(static_cast<std::uint64_t>(v.size()) == file.key_info("tokenizer.ggml.tokens").count,
              "vocabulary size differs from the token count");
    });
  });
}

inline void check_word_vectors(const auto& wv) {
  require(wv.vocab.size() == wv.vectors.rows(), "vocabulary size differs from the table rows");
  for (ember::Index i = 0; i < wv.vocab.size(); ++i) {
    require(!wv.vocab.token(i).empty(), "empty word accepted");
    require(ember::io::detail::is_valid_utf8(wv.vocab.token(i)), "non-UTF-8 word accepted");
  }
}

inline void fuzz_word_vectors(const std::uint8_t* data, std::size_t size,
                              ember::io::WordFormat format) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    const auto wv = ember::io::load_word_vectors<float>(path, format);
    check_word_vectors(wv);
    require(all_finite(wv.vectors), "non-finite value accepted");
  });
  expect_ok_or_ember_error(path, [&] {
    const auto wv = ember::io::load_word_vectors<double>(
        path, format, {.limit = ember::Index{2}, .allow_non_finite = true});
    check_word_vectors(wv);
    require(wv.vocab.size() <= 2, "limit not honoured");
  });
}

inline void fuzz_w2v_binary(const std::uint8_t* data, std::size_t size) {
  fuzz_word_vectors(data, size, ember::io::WordFormat::word2vec_binary);
}
inline void fuzz_w2v_text(const std::uint8_t* data, std::size_t size) {
  fuzz_word_vectors(data, size, ember::io::WordFormat::word2vec_text);
}
inline void fuzz_glove(const std::uint8_t* data, std::size_t size) {
  fuzz_word_vectors(data, size, ember::io::WordFormat::glove);
}

inline void fuzz_vocabulary(const std::uint8_t* data, std::size_t size) {
  const std::string& path = InputFile::instance().write(data, size);
  expect_ok_or_ember_error(path, [&] {
    const auto v = ember::io::load_vocabulary(path);
    for (ember::Index i = 0; i < v.size(); ++i) {
      require(v.id(v.token(i)) == i, "token/id round trip failed");
    }
  });
  expect_ok_or_ember_error(path, [&] {
    const auto v = ember::io::load_vocabulary(path, {.unk_token = std::string("<unk>")});
    require(v.unk_id().has_value(), "unk token not set");
  });
}

// ---- the id path ----------------------------------------------------------------------------

/// Reads little integers off the front of the input; zeros once it is used up.
class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::int64_t id(ember::Index vocab) {
    const std::uint8_t tag = byte();
    std::uint32_t raw = 0;
    for (int k = 0; k < 4; ++k) raw = (raw << 8) | byte();
    // Mostly valid ids, sometimes arbitrary 32-bit values (negative, huge) and the edges.
    switch (tag % 8) {
      case 0:
        return static_cast<std::int32_t>(raw);
      case 1:
        return vocab;
      case 2:
        return -1;
      default:
        return static_cast<std::int64_t>(raw % static_cast<std::uint32_t>(vocab));
    }
  }
  [[nodiscard]] bool done() const noexcept { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

inline ember::RowMatrix<float> table_of(ember::Index v, ember::Index d) {
  ember::RowMatrix<float> t(v, d);
  for (ember::Index r = 0; r < v; ++r)
    for (ember::Index c = 0; c < d; ++c)
      t(r, c) = static_cast<float>(r + 1) + 0.25f * static_cast<float>(c);
  return t;
}

/// Random ids and shapes into forward, backward, the fused pipeline, tied logits and the
/// queries. Besides "no crash", each call must either match a plain reference loop or throw an
/// ember exception and leave its outputs untouched (the strong guarantee).
inline void fuzz_ids(const std::uint8_t* data, std::size_t size) {
  using ember::Index;
  using ember::RowMatrix;
  Cursor in(data, size);
  const Index v = 1 + in.byte() % 17;
  const Index d = 1 + in.byte() % 9;
  const Index n = in.byte() % 40;
  const Index seq_len = static_cast<Index>(in.byte() % 12) - 1;  // -1 .. 10
  const Index offset = static_cast<Index>(in.byte() % 12) - 2;   // -2 .. 9
  const Index max_len = 1 + in.byte() % 16;
  const Index shape_noise = in.byte() % 4;  // 0: right shapes, else off by one somewhere
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = in.id(v);
  std::vector<std::int32_t> ids32(ids.begin(), ids.end());  // narrowing on purpose: other values

  ember::Embedding<float> emb(table_of(v, d));
  const std::string none;
  const bool ids_valid =
      std::all_of(ids.begin(), ids.end(), [&](std::int64_t id) { return id >= 0 && id < v; });

  // forward, owning and into a (possibly mis-shaped) buffer.
  expect_ok_or_ember_error(none, [&] {
    const RowMatrix<float> out = emb.forward(ids);
    require(ids_valid, "forward accepted an out-of-range id");
    for (Index i = 0; i < n; ++i)
      require(out.row(i) == emb.weight().row(ids[static_cast<std::size_t>(i)]) * emb.scale(),
              "forward differs from the reference");
  });
  {
    const Index rows = n + (shape_noise == 1 ? 1 : 0);
    const Index cols = d + (shape_noise == 2 ? 1 : 0);
    RowMatrix<float> out = RowMatrix<float>::Constant(rows, cols, -7.0f);
    const RowMatrix<float> before = out;
    try {
      emb.forward(ids32, out);
      require(ids_valid && shape_noise != 1 && shape_noise != 2, "forward accepted bad input");
    } catch (const ember::Error& e) {
      check_error(e, none);
      require(out == before, "forward wrote into out before throwing");
    }
  }

  // backward into a sparse gradient, then merge and compare with a dense reference.
  {
    const Index gcols = d + (shape_noise == 3 ? 1 : 0);
    RowMatrix<float> grad_out(n, gcols);
    for (Index i = 0; i < grad_out.size(); ++i) grad_out.data()[i] = static_cast<float>(i % 5) - 2;
    ember::SparseRowGrad<float> g(v, d);
    ember::SparseRowGrad<float> warm(v, d);
    const std::int64_t first[1] = {0};
    const RowMatrix<float> one = RowMatrix<float>::Ones(1, d);
    emb.backward(first, one, warm);
    ember::SparseRowGrad<float> warm_before = warm;
    try {
      emb.backward(ids, grad_out, warm);
      require(ids_valid && shape_noise != 3, "backward accepted bad input");
      emb.backward(ids, grad_out, g);
      RowMatrix<float> ref = RowMatrix<float>::Zero(v, d);
      for (Index i = 0; i < n; ++i)
        ref.row(ids[static_cast<std::size_t>(i)]) += grad_out.row(i) * emb.scale();
      const RowMatrix<float> dense = g.to_dense();
      require(((dense - ref).cwiseAbs().array() <= 1e-3f * (1.0f + ref.cwiseAbs().array())).all(),
              "backward differs from the reference");
      ember::SparseRowGrad<float> merged = warm_before;
      merged.merge(g);
      require(merged.to_dense() == warm.to_dense(),
              "merge differs from accumulating in one gradient");
    } catch (const ember::Error& e) {
      check_error(e, none);
      require(warm.to_dense() == warm_before.to_dense(), "backward changed the gradient on throw");
    }
  }

  // The fused pipeline with random seq_len / offset / max_len.
  expect_ok_or_ember_error(none, [&] {
    const ember::SinusoidalEncoding<float> pe(max_len, d);
    RowMatrix<float> out = RowMatrix<float>::Zero(n, d);
    ember::embed_with_positions(emb, pe, ids, out, seq_len, offset);
    require(
        ids_valid && seq_len > 0 && offset >= 0 && offset + seq_len <= max_len && n % seq_len == 0,
        "embed_with_positions accepted bad input");
    require(all_finite(out), "embed_with_positions produced a non-finite value");
  });

  // Tied logits with a hidden matrix of random width.
  expect_ok_or_ember_error(none, [&] {
    const Index hcols = d + (shape_noise == 2 ? 1 : 0);
    const RowMatrix<float> hidden = RowMatrix<float>::Constant(n, hcols, 0.5f);
    const RowMatrix<float> lg = emb.logits(hidden);
    require(hcols == d && lg.rows() == n && lg.cols() == v, "logits shape");
    RowMatrix<float> grad_hidden(n, d);
    RowMatrix<float> grad_weight = RowMatrix<float>::Zero(v, d);
    emb.logits_backward(hidden, lg, grad_hidden, grad_weight);
    require(all_finite(grad_hidden) && all_finite(grad_weight), "logits_backward not finite");
  });

  // Queries by id with a random k and exclusions.
  expect_ok_or_ember_error(none, [&] {
    const ember::query::Neighbours<float> nn(emb.weight());
    const Index k = static_cast<Index>(in.byte() % 24) - 2;
    ember::query::QueryOptions opt;
    opt.exclude.assign(ids.begin(), ids.begin() + std::min<Index>(n, 3));
    opt.restrict_to = static_cast<Index>(in.byte() % 20) - 1;
    const auto best = nn.nearest(ids.empty() ? 0 : ids.front(), k, opt);
    require(static_cast<Index>(best.size()) <= std::max<Index>(k, 0), "nearest returned > k");
    for (const auto& r : best) require(r.id >= 0 && r.id < v && std::isfinite(r.score), "result");
  });
}

}  // namespace ember_fuzz

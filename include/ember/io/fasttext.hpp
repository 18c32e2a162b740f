/// fastText models: load_fasttext reads a .bin (format version 12, or 11) or .ftz
/// (product-quantized) file, validated completely, into a FastTextModel, which answers as fastText
/// does: word vectors bit for bit, sentence vectors, subwords, nearest neighbours, analogies and
/// predictions.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/io/detail/fasttext_arithmetic.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/keys/subwords.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// The kind of a fastText model (its -model: `fasttext cbow`, `skipgram` or `supervised`).
enum class FastTextModelType : std::int32_t { cbow = 1, skipgram = 2, supervised = 3 };

/// The loss a fastText model was trained with (-loss).
enum class FastTextLoss : std::int32_t { hs = 1, ns = 2, softmax = 3, ova = 4 };

/// The name fastText prints for a model type ("cbow", "sg", "sup").
[[nodiscard]] constexpr const char* to_string(FastTextModelType t) noexcept {
  return t == FastTextModelType::cbow ? "cbow" : t == FastTextModelType::skipgram ? "sg" : "sup";
}
/// The name fastText prints for a loss ("hs", "ns", "softmax", "one-vs-all").
[[nodiscard]] constexpr const char* to_string(FastTextLoss l) noexcept {
  return l == FastTextLoss::hs        ? "hs"
         : l == FastTextLoss::ns      ? "ns"
         : l == FastTextLoss::softmax ? "softmax"
                                      : "one-vs-all";
}

/// The training arguments a fastText model stores (fastText's Args::save, in its order). Only
/// dim, word_ngrams, loss, model, bucket, minn and maxn change the answers; the others are kept
/// as read.
struct FastTextArgs {
  std::int32_t dim = 0;
  std::int32_t ws = 0;
  std::int32_t epoch = 0;
  std::int32_t min_count = 0;
  std::int32_t neg = 0;
  std::int32_t word_ngrams = 0;
  FastTextLoss loss = FastTextLoss::ns;
  FastTextModelType model = FastTextModelType::skipgram;
  std::int32_t bucket = 0;
  std::int32_t minn = 0;
  std::int32_t maxn = 0;
  std::int32_t lr_update_rate = 0;
  double t = 0;
};

/// Options of load_fasttext().
struct FastTextLoadOptions {
  /// Accept NaN and infinite values in the matrices and centroids (a FormatError naming the byte,
  /// matrix, row and column otherwise: fastText's own queries fail on a NaN).
  bool allow_non_finite = false;
};

/// One prediction: a label's index (in [0, nlabels())), its name and fastText's probability.
struct FastTextPrediction {
  TokenId id = 0;
  std::string label;
  float probability = 0;
  friend bool operator==(const FastTextPrediction&, const FastTextPrediction&) = default;
};

/// One neighbour: a word's id and its cosine similarity with the query, as fastText computes it.
struct FastTextNeighbour {
  TokenId id = 0;
  float score = 0;
  friend bool operator==(const FastTextNeighbour&, const FastTextNeighbour&) = default;
};

class FastTextModel;
FastTextModel load_fasttext(const std::string& path, const FastTextLoadOptions& options = {});

}  // namespace ember::inline EMBER_ISA::io

namespace ember::inline EMBER_ISA::detail {

/// Everything a fastText file holds, validated (load_fasttext's parse, FastTextModel's parts).
struct FastTextFile {
  io::FastTextArgs args;
  std::int32_t version = 0;
  SubwordIndex index;
  std::vector<std::int64_t> word_counts;
  std::vector<std::int64_t> label_counts;
  std::int64_t ntokens = 0;
  bool quant_input = false;
  RowMatrix<float> input;
  QuantizedRows qinput;
  bool quant_output = false;
  RowMatrix<float> output;
  QuantizedRows qoutput;
};

/// The name of what a read is of: `what` itself, or what it returns when it is callable.
template <class What>
[[nodiscard]] std::string describe(const What& what) {
  if constexpr (std::is_invocable_v<const What&>) {
    return what();
  } else {
    return std::string(what);
  }
}

/// A bounds-checked cursor over the mapped bytes of a model file: every read names what it reads,
/// so a short file says where it ends and what was expected there.
class FastTextReader {
 public:
  FastTextReader(const unsigned char* data, std::size_t size, int fd, const std::string& path)
      : data_(data), size_(size), fd_(fd), path_(path) {}

  [[nodiscard]] std::size_t pos() const noexcept { return pos_; }
  [[nodiscard]] std::size_t left() const noexcept { return size_ - pos_; }
  [[nodiscard]] const unsigned char* here() const noexcept { return data_ + pos_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// A descriptor of the same file, for the matrices (read_chunks).
  [[nodiscard]] int fd() const noexcept { return fd_; }

  /// Throws FormatError at byte `at`, `what` the parts of the message (detail::fail_at_byte).
  template <class... What>
  [[noreturn]] void fail(std::size_t at, const What&... what) const {
    detail::fail_at_byte(path_, at, what...);
  }
  /// Fails unless n more bytes are left. `what` names them: a string, or a callable returning
  /// one (built only when the read fails, so a million reads build no string).
  template <class What>
  void need(std::size_t n, const What& what) const {
    if (left() < n) {
      fail(pos_, "the file ends inside ", describe(what), " (", n, " bytes needed, ", left(),
           " left)");
    }
  }
  void skip(std::size_t n) noexcept { pos_ += n; }

  template <class T, class What>
  [[nodiscard]] T get(const What& what) {
    need(sizeof(T), what);
    const T v = detail::load_value<T>(data_ + pos_, true);
    pos_ += sizeof(T);
    return v;
  }
  /// A bool byte: 0 or 1.
  template <class What>
  [[nodiscard]] bool flag(const What& what) {
    const std::size_t at = pos_;
    const auto b = get<std::uint8_t>(what);
    if (b > 1) fail(at, describe(what), " is ", b, ", expected 0 or 1");
    return b == 1;
  }
  /// A NUL-terminated string (the NUL consumed, not returned).
  template <class What>
  [[nodiscard]] std::string_view cstring(const What& what) {
    const void* nul = left() == 0 ? nullptr : std::memchr(here(), 0, left());
    if (nul == nullptr) {
      fail(pos_, "the file ends inside ", describe(what), " (no terminating NUL byte)");
    }
    const auto n = static_cast<std::size_t>(static_cast<const unsigned char*>(nul) - here());
    const std::string_view s(reinterpret_cast<const char*>(here()), n);
    pos_ += n + 1;
    return s;
  }

 private:
  const unsigned char* data_;
  std::size_t size_;
  int fd_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

/// A read-only descriptor, closed on destruction.
class ReadOnlyFd {
 public:
  explicit ReadOnlyFd(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    if (fd_ < 0) {
      detail::fail_at_byte(path, 0, std::string("cannot open file (") + std::strerror(errno) + ")");
    }
  }
  ReadOnlyFd(const ReadOnlyFd&) = delete;
  ReadOnlyFd& operator=(const ReadOnlyFd&) = delete;
  ~ReadOnlyFd() { ::close(fd_); }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_;
};

/// Reads n bytes of the file at `offset` into dst with pread, 1 MiB at a time, calling
/// check(chunk_begin, chunk_bytes) on each chunk while it is still in cache. The kernel copies the
/// page cache straight into dst: the matrix's pages are never mapped, so the process holds one
/// copy of them. The range must lie in the file (checked before).
template <class Check>
void read_chunks(const FastTextReader& in, std::size_t offset, unsigned char* dst, std::size_t n,
                 Check&& check) {
  constexpr std::size_t chunk = std::size_t{1} << 20;
  for (std::size_t done = 0; done < n;) {
    const std::size_t k = std::min(chunk, n - done);
    std::size_t got = 0;
    while (got < k) {
      const ::ssize_t r =
          ::pread(in.fd(), dst + done + got, k - got, static_cast<::off_t>(offset + done + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        in.fail(offset + done + got,
                r == 0 ? std::string("the file shrank while it was read")
                       : std::string("cannot read the file (") + std::strerror(errno) + ")");
      }
      got += static_cast<std::size_t>(r);
    }
    check(done, k);
    done += k;
  }
}

/// Index of the first NaN or infinity among v[0, n), or n: one branch-free pass over the exponent
/// bits (which the compiler vectorizes), the position searched for only when there is one.
[[nodiscard]] inline std::size_t find_non_finite(const float* v, std::size_t n) noexcept {
  constexpr std::uint32_t exponent = 0x7F800000u;
  std::uint32_t worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    worst = std::max(worst, bits & exponent);
  }
  return worst == exponent ? detail::first_non_finite(v, n) : n;
}

/// Checks that rows x cols floats (what) fit in what is left of the file.
inline void need_floats(const FastTextReader& in, std::uint64_t rows, std::uint64_t cols,
                        const std::string& what) {
  const auto values = detail::checked_mul(rows, cols);
  const auto bytes = values ? detail::checked_mul(*values, 4) : std::nullopt;
  if (!bytes || *bytes > in.left()) {
    in.fail(in.pos(), "the file ends inside ", what, " (", rows, " x ", cols, " floats, ",
            in.left(), " bytes left)");
  }
}

/// Reads rows x cols little-endian floats into `out`, rejecting a non-finite value unless allowed.
/// The size must have been checked (need_floats).
inline void read_float_matrix(FastTextReader& in, Index rows, Index cols, bool allow_non_finite,
                              const std::string& what, float* out) {
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const std::size_t start = in.pos();
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  read_chunks(in, start, bytes, count * 4, [&](std::size_t done, std::size_t k) {
    float* values = out + done / 4;
    if constexpr (!detail::host_is_little_endian) {
      for (std::size_t i = 0; i < k / 4; ++i) {
        values[i] = detail::load_value<float>(bytes + done + 4 * i, true);
      }
    }
    if (allow_non_finite) return;
    const std::size_t bad = find_non_finite(values, k / 4);
    if (bad < k / 4) {
      const std::size_t v = done / 4 + bad;
      const auto c = static_cast<std::size_t>(cols);
      const std::string where =
          cols == 1 ? "value " + std::to_string(v)
                    : "row " + std::to_string(v / c) + ", column " + std::to_string(v % c);
      in.fail(start + 4 * v, "non-finite value ", values[bad], " at ", where, " of ", what);
    }
  });
  in.skip(count * 4);
}

/// Reads a matrix's row and column counts (int64 each), which must be `rows` and `dim`;
/// `rows_are` says in a message what the rows should number.
inline void read_shape(FastTextReader& in, Index rows, std::int32_t dim, const std::string& what,
                       const std::string& rows_are) {
  std::size_t at = in.pos();
  const auto m = in.get<std::int64_t>([&] { return what + "'s row count"; });
  if (m != rows) {
    in.fail(at, what, " has ", m, " rows, expected ", rows_are);
  }
  at = in.pos();
  const auto n = in.get<std::int64_t>([&] { return what + "'s column count"; });
  if (n != dim) {
    in.fail(at, what, " has ", n, " columns, expected args.dim = ", dim);
  }
}

/// Reads a DenseMatrix of `rows` x `dim` (its shape, then the floats).
inline RowMatrix<float> read_dense(FastTextReader& in, Index rows, std::int32_t dim,
                                   bool allow_non_finite, const std::string& what,
                                   const std::string& rows_are) {
  read_shape(in, rows, dim, what, rows_are);
  need_floats(in, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(dim),
              what + "'s values");
  RowMatrix<float> out(rows, dim);
  read_float_matrix(in, rows, dim, allow_non_finite, what, out.data());
  return out;
}

/// Reads one ProductQuantizer (dim, nsubq, dsub, lastdsub, dim x 256 centroids), checking its
/// shape against `dim`.
inline ProductQuantizer read_pq(FastTextReader& in, std::int32_t dim, bool allow_non_finite,
                                const std::string& what) {
  ProductQuantizer pq;
  std::size_t at = in.pos();
  pq.dim = in.get<std::int32_t>(what + "'s dimension");
  if (pq.dim != dim) {
    in.fail(at, what, "'s dimension is ", pq.dim, ", expected ", dim);
  }
  at = in.pos();
  pq.nsubq = in.get<std::int32_t>(what + "'s number of sub-quantizers");
  const std::size_t at_dsub = in.pos();
  pq.dsub = in.get<std::int32_t>(what + "'s sub-vector size");
  const std::size_t at_last = in.pos();
  pq.lastdsub = in.get<std::int32_t>(what + "'s last sub-vector size");
  if (pq.dsub < 1) {
    in.fail(at_dsub, what, "'s sub-vector size is ", pq.dsub, ", expected at least 1");
  }
  const std::int32_t nsubq = dim / pq.dsub + (dim % pq.dsub != 0 ? 1 : 0);
  if (pq.nsubq != nsubq) {
    in.fail(at, what, " has ", pq.nsubq, " sub-quantizers, expected ", nsubq, " (dimension ", dim,
            " in sub-vectors of ", pq.dsub, ")");
  }
  const std::int32_t last = dim % pq.dsub == 0 ? pq.dsub : dim % pq.dsub;
  if (pq.lastdsub != last) {
    in.fail(at_last, what, "'s last sub-vector size is ", pq.lastdsub, ", expected ", last);
  }
  const auto n = static_cast<std::size_t>(dim) * 256;
  need_floats(in, n, 1, what + "'s centroids");
  pq.centroids.resize(n);
  read_float_matrix(in, static_cast<Index>(n), 1, allow_non_finite, what + "'s centroids",
                    pq.centroids.data());
  return pq;
}

/// Reads a QuantMatrix of `rows` x `dim` (qnorm, m, n, codesize, codes, quantizer, norms).
inline QuantizedRows read_quantized(FastTextReader& in, Index rows, std::int32_t dim,
                                    bool allow_non_finite, const std::string& what,
                                    const std::string& rows_are) {
  QuantizedRows q;
  q.qnorm = in.flag(what + "'s qnorm flag");
  read_shape(in, rows, dim, what, rows_are);
  q.rows = rows;
  q.cols = dim;
  const std::size_t at_codesize = in.pos();
  const auto codesize = in.get<std::int32_t>(what + "'s code size");
  if (codesize < 0) {
    in.fail(at_codesize, what, "'s code size is ", codesize, ", expected >= 0");
  }
  const auto code_bytes = static_cast<std::size_t>(codesize);
  in.need(code_bytes, what + "'s codes (" + std::to_string(code_bytes) + " bytes)");
  const std::size_t codes = in.pos();
  in.skip(code_bytes);  // read once the quantizer says how many a row has
  q.pq = read_pq(in, dim, allow_non_finite, what + "'s quantizer");
  const auto expected = static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(q.pq.nsubq);
  if (code_bytes != expected) {
    in.fail(at_codesize, what, "'s code size is ", codesize, ", expected ", expected, " (", rows,
            " rows x ", q.pq.nsubq, " sub-quantizers)");
  }
  q.codes.resize(code_bytes);
  read_chunks(in, codes, q.codes.data(), code_bytes, [](std::size_t, std::size_t) {});
  if (q.qnorm) {
    const auto nrows = static_cast<std::size_t>(rows);
    in.need(nrows, what + "'s norm codes (" + std::to_string(nrows) + " bytes)");
    q.norm_codes.assign(in.here(), in.here() + nrows);
    in.skip(nrows);
    q.npq = read_pq(in, 1, allow_non_finite, what + "'s norm quantizer");
  }
  return q;
}

/// The offset of dictionary entry `target` (for an error found after the entries were read).
inline std::size_t entry_offset(const unsigned char* data, std::size_t first, Index target) {
  std::size_t pos = first;
  for (Index i = 0; i < target; ++i) {
    pos += std::strlen(reinterpret_cast<const char*>(data + pos)) + 1 + 8 + 1;
  }
  return pos;
}

/// Parses and validates a whole fastText model file (load_fasttext).
inline FastTextFile parse_fasttext(const std::string& path,
                                   const io::FastTextLoadOptions& options) {
  // The dictionary is parsed from a mapping; the matrices are read through a descriptor.
  const detail::MappedFile file(path);
  const ReadOnlyFd fd(path);
  FastTextReader in(file.data(), file.size(), fd.get(), path);
  FastTextFile out;
  if (file.size() == 0) in.fail(0, "empty file, expected a fastText model (.bin or .ftz)");

  // ---- header
  constexpr std::int32_t magic = 793712314;
  const auto got_magic = in.get<std::int32_t>("the magic number");
  if (got_magic != magic) {
    in.fail(0, "not a fastText model: magic number ", got_magic, ", expected 793712314");
  }
  out.version = in.get<std::int32_t>("the format version");
  if (out.version != 11 && out.version != 12) {
    in.fail(4, "format version ", out.version, " is not supported, expected 12 (or 11)");
  }

  // ---- args
  io::FastTextArgs& a = out.args;
  std::array<std::size_t, 13> at{};
  auto i32 = [&](std::size_t k, const char* name) {
    at[k] = in.pos();
    return in.get<std::int32_t>([name] { return std::string("args.") + name; });
  };
  a.dim = i32(0, "dim");
  a.ws = i32(1, "ws");
  a.epoch = i32(2, "epoch");
  a.min_count = i32(3, "minCount");
  a.neg = i32(4, "neg");
  a.word_ngrams = i32(5, "wordNgrams");
  const std::int32_t loss = i32(6, "loss");
  const std::int32_t model = i32(7, "model");
  a.bucket = i32(8, "bucket");
  a.minn = i32(9, "minn");
  a.maxn = i32(10, "maxn");
  a.lr_update_rate = i32(11, "lrUpdateRate");
  a.t = in.get<double>("args.t");
  // Fails at byte at_v unless v >= min: "<what> is <v>, expected >= <min>".
  const auto at_least = [&](std::size_t at_v, const char* what, std::int64_t v, std::int64_t min) {
    if (v < min) in.fail(at_v, what, " is ", v, ", expected >= ", min);
  };
  at_least(at[0], "args.dim", a.dim, 1);
  at_least(at[5], "args.wordNgrams", a.word_ngrams, 0);
  if (loss < 1 || loss > 4) {
    in.fail(at[6], "args.loss is ", loss,
            ", expected 1 (hs), 2 (ns), 3 (softmax) or 4 (one-vs-all)");
  }
  if (model < 1 || model > 3) {
    in.fail(at[7], "args.model is ", model, ", expected 1 (cbow), 2 (skipgram) or 3 (supervised)");
  }
  a.loss = static_cast<io::FastTextLoss>(loss);
  a.model = static_cast<io::FastTextModelType>(model);
  at_least(at[8], "args.bucket", a.bucket, 0);
  at_least(at[9], "args.minn", a.minn, 0);
  at_least(at[10], "args.maxn", a.maxn, 0);
  const bool supervised = a.model == io::FastTextModelType::supervised;
  // fastText: "old supervised models do not use char ngrams".
  if (out.version == 11 && supervised) a.maxn = 0;
  const bool hashes_ngrams = (a.maxn >= 1 && a.maxn >= a.minn) || a.word_ngrams > 1;
  if (a.bucket == 0 && hashes_ngrams) {
    in.fail(at[8], "args.bucket is 0, but minn ", a.minn, ", maxn ", a.maxn, " and wordNgrams ",
            a.word_ngrams, " hash n-grams into buckets");
  }

  // ---- dictionary
  const std::size_t at_size = in.pos();
  const auto size = in.get<std::int32_t>("the dictionary size");
  const std::size_t at_nwords = in.pos();
  const auto nwords = in.get<std::int32_t>("the dictionary's word count");
  const std::size_t at_nlabels = in.pos();
  const auto nlabels = in.get<std::int32_t>("the dictionary's label count");
  at_least(at_size, "the dictionary size", size, 0);
  at_least(at_nwords, "the word count", nwords, 0);
  if (nlabels < 0 || std::int64_t{nwords} + nlabels != size) {
    in.fail(at_nlabels, "the label count is ", nlabels,
            ", expected size - words = ", std::int64_t{size} - nwords);
  }
  if (std::int64_t{nwords} + a.bucket > std::numeric_limits<std::int32_t>::max()) {
    in.fail(at_nwords, nwords, " words and ", a.bucket,
            " buckets need more rows than fastText's 32-bit ids hold");
  }
  const std::size_t at_ntokens = in.pos();
  out.ntokens = in.get<std::int64_t>("the token count");
  at_least(at_ntokens, "the token count", out.ntokens, 0);
  const std::size_t at_prune = in.pos();
  const auto prune_size = in.get<std::int64_t>("the prune index size");
  if (prune_size < -1) {
    in.fail(at_prune, "the prune index size is ", prune_size, ", expected -1 (not pruned) or >= 0");
  }
  // Every row the matrices hold is dim values of the file, so the file bounds dim; a model with
  // no row at all leaves dim unbounded, and every answer is a dim-wide vector (2^31 - 1 claimed
  // in a 126-byte file would make each query allocate 8 GB). fastText never writes one: it
  // refuses to train on an empty vocabulary.
  const Index buckets = prune_size >= 0 ? Index{prune_size} : Index{a.bucket};
  if (nwords == 0 && buckets == 0 && (!supervised || nlabels == 0)) {  // (prune_size unbounded yet)
    in.fail(at_size, "the model has no row in either matrix (", nwords, " words, ", nlabels,
            " labels, 0 buckets), so args.dim ", a.dim, " is backed by no value");
  }
  // Each entry takes at least 11 bytes (a 1-byte word, its NUL, the count, the type).
  if (static_cast<std::uint64_t>(size) * 11 > in.left()) {
    in.fail(at_size, "the dictionary claims ", size, " entries, more than the ", in.left(),
            " bytes left can hold");
  }
  const std::size_t at_entries = in.pos();
  std::vector<std::string_view> words;
  std::vector<std::string_view> labels;
  words.reserve(static_cast<std::size_t>(nwords));
  labels.reserve(static_cast<std::size_t>(nlabels));
  out.word_counts.reserve(static_cast<std::size_t>(nwords));
  out.label_counts.reserve(static_cast<std::size_t>(nlabels));
  for (std::int32_t i = 0; i < size; ++i) {
    auto of_entry = [i](const char* part) {
      return [i, part] { return std::string(part) + "dictionary entry " + std::to_string(i); };
    };
    const std::size_t at_word = in.pos();
    const std::string_view w = in.cstring(of_entry("the word of "));
    if (w.empty()) in.fail(at_word, of_entry("")(), " has an empty word");
    const std::size_t at_count = in.pos();
    const auto count = in.get<std::int64_t>(of_entry("the count of "));
    if (count < 0) {
      const std::string entry = of_entry("")();
      in.fail(at_count, entry, " (", detail::quoted(w), ") has count ", count, ", expected >= 0");
    }
    const std::size_t at_type = in.pos();
    const auto type = in.get<std::int8_t>(of_entry("the type of "));
    const bool is_word = i < nwords;
    if (type != (is_word ? 0 : 1)) {
      const std::string entry = of_entry("")();
      in.fail(at_type, entry, " (", detail::quoted(w), ") has type ", type, ", expected ",
              (is_word ? "0 (a word: entries 0 .. " : "1 (a label: entries "),
              (is_word ? std::to_string(nwords - 1) + " are words)"
                       : std::to_string(nwords) + " on are labels)"));
    }
    (is_word ? words : labels).push_back(w);
    (is_word ? out.word_counts : out.label_counts).push_back(count);
  }
  std::optional<std::vector<std::pair<std::int32_t, std::int32_t>>> kept;
  if (prune_size >= 0) {
    const auto n = static_cast<std::uint64_t>(prune_size);
    if (n > in.left() / 8) {
      in.fail(at_prune, "the prune index claims ", n, " pairs, more than the ", in.left(),
              " bytes left can hold");
    }
    kept.emplace();
    kept->reserve(static_cast<std::size_t>(n));
    const std::size_t at_pairs = in.pos();
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    for (std::uint64_t i = 0; i < n; ++i) {
      auto of_pair = [i](const char* part) {
        return [i, part] { return std::string(part) + "prune index pair " + std::to_string(i); };
      };
      const std::size_t at_key = in.pos();
      const auto key = in.get<std::int32_t>(of_pair("the bucket of "));
      const std::size_t at_value = in.pos();
      const auto value = in.get<std::int32_t>(of_pair("the row of "));
      if (key < 0 || key >= a.bucket) {
        in.fail(at_key, of_pair("")(), " has bucket ", key, ", expected [0, ", a.bucket, ")");
      }
      if (value < 0 || static_cast<std::uint64_t>(value) >= n ||
          seen[static_cast<std::size_t>(value)]) {
        in.fail(at_value, of_pair("")(), " has row ", value, ", expected a row of [0, ", n,
                ") not given before");
      }
      seen[static_cast<std::size_t>(value)] = true;
      kept->emplace_back(key, value);
    }
    std::vector<std::pair<std::int32_t, std::int32_t>> by_bucket(*kept);
    for (std::size_t i = 0; i < by_bucket.size(); ++i)
      by_bucket[i].second = static_cast<std::int32_t>(i);
    std::sort(by_bucket.begin(), by_bucket.end());
    for (std::size_t i = 1; i < by_bucket.size(); ++i) {
      if (by_bucket[i].first == by_bucket[i - 1].first) {
        const auto later =
            static_cast<std::size_t>(std::max(by_bucket[i].second, by_bucket[i - 1].second));
        in.fail(at_pairs + 8 * later, "prune index pair ", later, " repeats bucket ",
                by_bucket[i].first);
      }
    }
  }
  try {
    SubwordOptions opt{.minn = a.minn,
                       .maxn = a.maxn,
                       .bucket = a.bucket,
                       .word_ngrams = a.word_ngrams,
                       .label_prefix = "__label__"};
    out.index = SubwordIndex(words, labels, std::move(opt), std::move(kept));
  } catch (const ValueError& e) {  // a repeated entry (everything else was checked above)
    const auto id = static_cast<Index>(e.value());
    const Index entry_id = id;
    in.fail(entry_offset(file.data(), at_entries, entry_id), "dictionary entry ", entry_id,
            " repeats an earlier entry (", e.what(), ")");
  }

  // ---- input matrix
  const std::size_t at_quant = in.pos();
  out.quant_input = in.flag("the input matrix's quantization flag");
  if (prune_size >= 0 && !out.quant_input) {
    in.fail(at_quant, "a pruned dictionary (prune index of ", prune_size,
            " pairs) with a dense input matrix (fastText refuses such a model)");
  }
  const Index input_rows = Index{nwords} + buckets;
  const std::string input_rows_are =
      (prune_size >= 0 ? "words + kept buckets = " : "words + buckets = ") +
      std::to_string(input_rows);
  if (out.quant_input) {
    out.qinput = read_quantized(in, input_rows, a.dim, options.allow_non_finite, "the input matrix",
                                input_rows_are);
  } else {
    out.input = read_dense(in, input_rows, a.dim, options.allow_non_finite, "the input matrix",
                           input_rows_are);
  }

  // ---- output matrix
  out.quant_output = in.flag("the output matrix's quantization flag") && out.quant_input;
  const Index output_rows = supervised ? Index{nlabels} : Index{nwords};
  const std::string output_rows_are =
      std::to_string(output_rows) + (supervised ? " (the labels)" : " (the words)");
  if (out.quant_output) {
    out.qoutput = read_quantized(in, output_rows, a.dim, options.allow_non_finite,
                                 "the output matrix", output_rows_are);
  } else {
    out.output = read_dense(in, output_rows, a.dim, options.allow_non_finite, "the output matrix",
                            output_rows_are);
  }
  if (in.left() != 0) {
    in.fail(in.pos(), in.left(), " bytes after the output matrix, expected the end of the file");
  }
  if (supervised && a.loss == io::FastTextLoss::hs) {
    constexpr auto limit = static_cast<std::int64_t>(1e15);
    std::int64_t total = 0;  // stops at the limit, so it never overflows
    for (const std::int64_t c : out.label_counts) {
      total += std::min(c, limit);
      if (total >= limit) break;
    }
    if (total >= limit) {
      in.fail(at_entries,
              "the label counts add up to 10^15 or more; fastText's Huffman tree "
              "needs less");
    }
  }
  return out;
}

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::io {

/// A fastText model as fastText's own library holds it: its arguments, its dictionary (words and
/// labels with their counts, the prune index of a quantized model), its input matrix (dense, or
/// product-quantized in a .ftz) and its output matrix; it answers as fastText's FastText class
/// and Python module do.
///
/// Answers and their conventions (fastText 0.9.2, whose answers the tests reproduce):
/// - word_vector(w): the mean of the rows of subword_index().ids(w) (w's own row if w is in the
///   dictionary, then its character n-grams): the rows summed in that order from zero, then
///   multiplied by the float of 1.0 / n, bit for bit with fastText's getWordVector (a zero vector
///   when w has no rows: "</s>" out of the vocabulary, or n-grams that a pruned model dropped).
/// - Lines: tokenize() splits on fastText's separators (space, tab, vertical tab, form feed,
///   carriage return, NUL) and ends with "</s>", as fastText reads a line ending in '\n'; a line
///   given here must not contain '\n' (one line at a time, as fastText's Python module demands).
///   line_ids() are the rows of its words and word n-grams (SubwordIndex::append_line_ids);
///   labels in it are left out.
/// - sentence_vector: supervised models average the rows of line_ids(); others average the unit
///   word vectors of the words split on C whitespace (space, \t, \v, \f, \r: not NUL), skipping
///   zero vectors, with no "</s>" (fastText's getSentenceVector).
/// - nearest(w, k), analogies(a, b, c, k): cosine against the unit vectors of every word,
///   fastText's nn and analogies: the query words themselves excluded, a - b + c for analogies,
///   its scores and its order (ties as fastText's heap leaves them).
/// - predict(line, k, threshold): fastText's labels and probabilities for the softmax, one-vs-all
///   (and negative sampling) losses and the hierarchical softmax (its Huffman tree over the label
///   counts, its depth-first search, which also cuts every branch below probability 1e-5 even at
///   threshold 0), with fastText's sigmoid table and its log(p + 1e-5).
///
/// Every product fastText rounds before adding is rounded here too (no fused multiply-add), so the
/// answers are fastText's bits whatever the compiler's flags.
///
/// Memory: the input matrix once (read, not mapped: fastText's rows are not aligned in its file),
/// the dictionary compactly; nearest() and analogies() build the unit word vectors on first use
/// (words x dim floats, as fastText does).
///
/// Thread safety: const members may be called concurrently. Movable, not copyable.
///
/// Example:
/// ```cpp
/// const auto model = ember::io::load_fasttext("cc.en.300.bin");
/// ember::RowVector<float> v = model.word_vector("ember");       // any word, seen or not
/// for (auto [id, score] : model.nearest("emberr", 5))
///   std::printf("%s %f\n", std::string(model.word(id)).c_str(), score);
/// ```
class FastTextModel {
 public:
  FastTextModel(FastTextModel&&) noexcept = default;
  FastTextModel& operator=(FastTextModel&&) noexcept = default;
  FastTextModel(const FastTextModel&) = delete;
  FastTextModel& operator=(const FastTextModel&) = delete;
  ~FastTextModel() = default;

  /// The arguments stored in the file (maxn reads 0 for a version-11 supervised model, as
  /// fastText sets it).
  [[nodiscard]] const FastTextArgs& args() const noexcept { return f_.args; }
  /// The file's format version (12, or 11).
  [[nodiscard]] std::int32_t version() const noexcept { return f_.version; }
  /// The vector width.
  [[nodiscard]] Index dim() const noexcept { return f_.args.dim; }
  /// True for a supervised model (a classifier: predict() works).
  [[nodiscard]] bool supervised() const noexcept {
    return f_.args.model == FastTextModelType::supervised;
  }
  /// True when the input matrix is product-quantized (a .ftz).
  [[nodiscard]] bool quantized() const noexcept { return f_.quant_input; }
  /// True when the output matrix is product-quantized too (quantize -qout).
  [[nodiscard]] bool output_quantized() const noexcept { return f_.quant_output; }

  /// Number of words of the dictionary.
  [[nodiscard]] Index nwords() const noexcept { return f_.index.nwords(); }
  /// Number of labels of the dictionary.
  [[nodiscard]] Index nlabels() const noexcept { return f_.index.nlabels(); }
  /// Number of tokens of the training data (the dictionary's ntokens).
  [[nodiscard]] std::int64_t ntokens() const noexcept { return f_.ntokens; }
  /// The dictionary as a SubwordIndex: words, labels, n-gram rows, prune index.
  [[nodiscard]] const SubwordIndex& subword_index() const noexcept { return f_.index; }

  /// The word of id `id`. Throws: IndexError if id is outside [0, nwords()).
  [[nodiscard]] std::string_view word(TokenId id) const {
    detail::check_index("FastTextModel::word", "id", id, nwords());
    return f_.index.token(id);
  }
  /// The id of `word`, or std::nullopt when it is not a word of the dictionary.
  [[nodiscard]] std::optional<TokenId> word_id(std::string_view word) const noexcept {
    const auto id = f_.index.find(word);
    if (!id || *id >= nwords()) return std::nullopt;
    return id;
  }
  /// How often word `id` occurred in the training data. Throws: IndexError.
  [[nodiscard]] std::int64_t word_count(TokenId id) const {
    detail::check_index("FastTextModel::word_count", "id", id, nwords());
    return f_.word_counts[static_cast<std::size_t>(id)];
  }
  /// Label `id` (in [0, nlabels())). Throws: IndexError.
  [[nodiscard]] std::string_view label(TokenId id) const {
    detail::check_index("FastTextModel::label", "id", id, nlabels());
    return f_.index.token(nwords() + id);
  }
  /// The index of `label` among the labels, or std::nullopt.
  [[nodiscard]] std::optional<TokenId> label_id(std::string_view label) const noexcept {
    const auto id = f_.index.find(label);
    if (!id || *id < nwords()) return std::nullopt;
    return *id - nwords();
  }
  /// How often label `id` occurred. Throws: IndexError.
  [[nodiscard]] std::int64_t label_count(TokenId id) const {
    detail::check_index("FastTextModel::label_count", "id", id, nlabels());
    return f_.label_counts[static_cast<std::size_t>(id)];
  }
  /// The words, in id order, as a Vocabulary (a copy): with normalized_word_vectors(), the
  /// arguments of a query::Neighbours over this model.
  [[nodiscard]] Vocabulary vocabulary() const {
    std::vector<std::string> words;
    words.reserve(static_cast<std::size_t>(nwords()));
    for (Index i = 0; i < nwords(); ++i) words.emplace_back(f_.index.token(i));
    return Vocabulary(std::move(words));
  }

  /// Rows of the input matrix (nwords() + buckets, or the rows kept by pruning).
  [[nodiscard]] Index input_rows() const noexcept {
    return f_.quant_input ? f_.qinput.rows : f_.input.rows();
  }
  /// Rows of the output matrix (labels of a classifier, words otherwise).
  [[nodiscard]] Index output_rows() const noexcept {
    return f_.quant_output ? f_.qoutput.rows : f_.output.rows();
  }
  /// The dense input matrix, input_rows() x dim(). Throws: StateError for a quantized model
  /// (fastText's "Can't export quantized matrix"; input_vector() decodes its rows).
  [[nodiscard]] const RowMatrix<float>& input_matrix() const {
    if (f_.quant_input)
      throw StateError("FastTextModel::input_matrix: the input matrix is quantized");
    return f_.input;
  }
  /// The dense output matrix, output_rows() x dim(). Throws: StateError when it is quantized.
  [[nodiscard]] const RowMatrix<float>& output_matrix() const {
    if (f_.quant_output) {
      throw StateError("FastTextModel::output_matrix: the output matrix is quantized");
    }
    return f_.output;
  }
  /// Row `row` of the input matrix, decoded for a quantized model (get_input_vector).
  /// Throws: IndexError if row is outside [0, input_rows()).
  [[nodiscard]] RowVector<float> input_vector(TokenId row) const {
    detail::check_row(row, input_rows(), "FastTextModel::input_vector");
    RowVector<float> v = RowVector<float>::Zero(dim());
    Scratch s(dim());
    add_input_row(row, v.data(), s.data());
    return v;
  }

  /// The n-gram strings and ids of `word` (fastText's get_subwords; see Subwords).
  [[nodiscard]] Subwords subwords(std::string_view word) const { return f_.index.subwords(word); }

  /// fastText's vector of `word`, seen or not (get_word_vector, bit for bit).
  /// Complexity: O(length · maxn) hashes and as many row additions.
  [[nodiscard]] RowVector<float> word_vector(std::string_view word) const {
    RowVector<float> v(dim());
    vector_into(word, v.data());
    return v;
  }
  /// word_vector(word) written into `out`. Throws: ShapeError if out.size() != dim().
  void word_vector(std::string_view word, Eigen::Ref<RowVector<float>> out) const {
    detail::check_extent("FastTextModel::word_vector", "out", 1, dim(), out.size(), "dim");
    vector_into(word, out.data());
  }
  /// Every word's vector, nwords() x dim() (fastText's .vec file, print-word-vectors).
  /// Shapes: → out[nwords, dim]. Complexity: nwords() word_vector calls.
  [[nodiscard]] RowMatrix<float> word_vectors() const {
    RowMatrix<float> m(nwords(), dim());
    for (Index i = 0; i < nwords(); ++i) vector_into(f_.index.token(i), m.row(i).data());
    return m;
  }
  /// Every word's vector divided by its norm (zero rows stay zero), nwords() x dim(): the
  /// vectors nearest() compares against, as fastText precomputes them.
  /// Shapes: → out[nwords, dim]. Complexity: nwords() word_vector calls and norms.
  [[nodiscard]] RowMatrix<float> normalized_word_vectors() const {
    RowMatrix<float> m(nwords(), dim());
    Scratch s(dim());
    for (Index i = 0; i < nwords(); ++i) unit_vector(f_.index.token(i), m.row(i).data(), s.data());
    return m;
  }

  /// The tokens fastText reads from `line` followed by a newline: the pieces between its
  /// separators (space, \t, \v, \f, \r, NUL), then "</s>". Views into `line` (and a static "</s>").
  /// Throws: ValueError if line contains '\n' (value() = its position).
  [[nodiscard]] static std::vector<std::string_view> tokenize(std::string_view line) {
    check_line(line, "FastTextModel::tokenize");
    std::vector<std::string_view> out = split(line, true);
    out.push_back(SubwordIndex::eos);
    return out;
  }
  /// The input rows of `line` as fastText's supervised getLine gives them (words, then word
  /// n-grams; labels left out). Throws: ValueError for a '\n' in line.
  [[nodiscard]] std::vector<TokenId> line_ids(std::string_view line) const {
    const auto tokens = tokenize(line);
    std::vector<TokenId> ids;
    f_.index.append_line_ids(tokens, ids);
    return ids;
  }

  /// fastText's sentence vector of `line` (get_sentence_vector; see the class comment).
  /// Shapes: line → out[dim]. Throws: ValueError for a '\n' in line (value() = its position).
  /// Complexity: one word_vector per word (unsupervised), or one row addition per line_ids row
  /// (supervised).
  [[nodiscard]] RowVector<float> sentence_vector(std::string_view line) const {
    RowVector<float> out = RowVector<float>::Zero(dim());
    Scratch s(dim());
    if (supervised()) {
      const std::vector<TokenId> ids = line_ids(line);
      for (const TokenId r : ids) add_input_row(r, out.data(), s.data());
      if (!ids.empty()) out *= static_cast<float>(1.0 / static_cast<double>(ids.size()));
      return out;
    }
    check_line(line, "FastTextModel::sentence_vector");
    RowVector<float> v(dim());
    std::size_t count = 0;
    for (const std::string_view w : split(line, false)) {
      vector_into(w, v.data());
      const float n = detail::norm(v.data(), s.data(), dim());
      if (n > 0) {
        v *= static_cast<float>(1.0 / static_cast<double>(n));
        detail::add_to(out.data(), v.data(), dim());
        ++count;
      }
    }
    if (count > 0) out *= static_cast<float>(1.0 / static_cast<double>(count));
    return out;
  }

  /// fastText's k most likely labels of `line` with their probabilities, best first, keeping only
  /// those of probability >= threshold (predict / predict-prob); k = -1 asks for every label.
  /// Empty when the line has no input rows or the model no labels.
  /// Throws: StateError for a model that is not supervised; ValueError for k = 0 or k < -1, a
  /// NaN threshold, a '\n' in line, or a score that is NaN, or infinite under softmax (values so
  /// large that a dot product overflows; fastText answers NaN probabilities there).
  /// Complexity: O((rows of the line + labels) · dim); hierarchical softmax visits only the
  /// branches above the cut.
  [[nodiscard]] std::vector<FastTextPrediction> predict(std::string_view line, Index k = 1,
                                                        float threshold = 0.0f) const {
    constexpr const char* where = "FastTextModel::predict";
    if (!supervised()) {
      throw StateError(detail::message(where, "the model is not supervised (it is ",
                                       to_string(f_.args.model), ")"));
    }
    if (k == 0 || k < -1) {
      throw ValueError(detail::message(where, "k must be >= 1, or -1 for every label, got ", k),
                       static_cast<double>(k));
    }
    if (std::isnan(threshold))
      throw ValueError(detail::message(where, "threshold is NaN"), threshold);
    const std::vector<TokenId> ids = line_ids(line);
    if (ids.empty() || nlabels() == 0) return {};
    const auto d = dim();
    Scratch s(d);
    float* scratch = s.data();
    RowVector<float> hidden = RowVector<float>::Zero(d);
    for (const TokenId r : ids) add_input_row(r, hidden.data(), scratch);
    hidden *= static_cast<float>(1.0 / static_cast<double>(ids.size()));
    // A k beyond the labels keeps them all, as fastText's heap does (it never fills).
    const auto want = static_cast<std::size_t>(k == -1 ? nlabels() : std::min(k, nlabels()));
    auto output_dot = [&](Index row) {
      const float v = f_.quant_output
                          ? f_.qoutput.dot_row(row, hidden.data(), scratch)
                          : detail::dot(f_.output.row(row).data(), hidden.data(), scratch, d);
      if (std::isnan(v)) {
        throw ValueError(detail::message(where, "the score of output row ", row,
                                         " is NaN (the model's values overflow)"),
                         v);
      }
      return v;
    };
    std::vector<detail::ScoredLabel> heap;
    heap.reserve(want + 1);
    if (f_.args.loss == FastTextLoss::hs) {
      detail::huffman_predict(tree_, want, threshold, output_dot, heap);
    } else {
      std::vector<float> out(static_cast<std::size_t>(nlabels()));
      for (Index i = 0; i < nlabels(); ++i) out[static_cast<std::size_t>(i)] = output_dot(i);
      if (f_.args.loss == FastTextLoss::softmax) {
        // An infinite score (finite values whose products overflow) makes exp(x - max) NaN.
        for (Index i = 0; i < nlabels(); ++i) {
          const float v = out[static_cast<std::size_t>(i)];
          if (!std::isfinite(v)) {
            throw ValueError(
                detail::message(where, "the score of output row ", i, " is ",
                                v > 0 ? "inf" : "-inf", " (the model's values overflow)"),
                v);
          }
        }
        detail::softmax_in_place(out);
      } else {
        for (float& v : out) v = detail::table_sigmoid(v);
      }
      detail::find_k_best(out, want, threshold, heap);
    }
    std::sort_heap(heap.begin(), heap.end(), detail::score_greater);
    std::vector<FastTextPrediction> result;
    result.reserve(heap.size());
    for (const auto& [logp, id] : heap) {
      result.push_back({id, std::string(label(id)), std::exp(logp)});
    }
    return result;
  }

  /// fastText's k nearest words of `word` (seen or not) by cosine, best first, `word` itself
  /// excluded (get_nearest_neighbors / nn). Builds the unit word vectors on the first call.
  /// Throws: ValueError for k < 0, or a NaN similarity (overflowing values; fastText answers NaN).
  /// Complexity: O(nwords · dim), then O(nwords log k).
  [[nodiscard]] std::vector<FastTextNeighbour> nearest(std::string_view word, Index k = 10) const {
    check_k(k, "FastTextModel::nearest");
    RowVector<float> q(dim());
    vector_into(word, q.data());
    const std::optional<TokenId> ban = word_id(word);
    return best_words(q.data(), k, {ban ? *ban : -1, -1, -1}, "FastTextModel::nearest");
  }

  /// fastText's analogies: the k words nearest to a/|a| - b/|b| + c/|c| (each norm + 1e-8), the
  /// three query words excluded; "a is to b as c is to ?" is analogies(b, a, c): fastText's
  /// argument order (get_analogies(wordA, wordB, wordC) is A - B + C).
  /// Throws: ValueError for k < 0, or a NaN similarity (as nearest).
  /// Complexity: as nearest (three word vectors, then one pass over the words).
  [[nodiscard]] std::vector<FastTextNeighbour> analogies(std::string_view a, std::string_view b,
                                                         std::string_view c, Index k = 10) const {
    check_k(k, "FastTextModel::analogies");
    const Index d = dim();
    Scratch s(d);
    RowVector<float> q = RowVector<float>::Zero(d);
    RowVector<float> v(d);
    const std::string_view words[3] = {a, b, c};
    const double sign[3] = {1.0, -1.0, 1.0};
    for (int i = 0; i < 3; ++i) {
      vector_into(words[i], v.data());
      const float n = detail::norm(v.data(), s.data(), d);
      const auto scale = static_cast<float>(sign[i] / (static_cast<double>(n) + 1e-8));
      detail::add_scaled(q.data(), v.data(), scale, s.data(), d);
    }
    std::array<TokenId, 3> ban{};
    for (int i = 0; i < 3; ++i) ban[static_cast<std::size_t>(i)] = word_id(words[i]).value_or(-1);
    return best_words(q.data(), k, ban, "FastTextModel::analogies");
  }

 private:
  friend FastTextModel load_fasttext(const std::string& path, const FastTextLoadOptions& options);

  explicit FastTextModel(detail::FastTextFile f) : f_(std::move(f)) {
    if (supervised() && f_.args.loss == FastTextLoss::hs) {
      tree_ = detail::build_huffman_tree(f_.label_counts);
    }
  }

  /// A float buffer: on the stack for small widths, else on the heap.
  class Scratch {
   public:
    explicit Scratch(Index n) {
      if (n > static_cast<Index>(local_.size())) heap_.resize(static_cast<std::size_t>(n));
    }
    [[nodiscard]] float* data() noexcept { return heap_.empty() ? local_.data() : heap_.data(); }

   private:
    std::array<float, 1024> local_;
    std::vector<float> heap_;
  };

  /// The panels nearest() scores, built once.
  struct Lazy {
    std::once_flag once;
    detail::RowPanels panels;
  };

  static void check_line(std::string_view line, const char* where) {
    if (const std::size_t nl = line.find('\n'); nl != std::string_view::npos) {
      throw ValueError(
          detail::message(where, "the line has a '\\n' at position ", nl, " (one line at a time)"),
          static_cast<double>(nl));
    }
  }
  static void check_k(Index k, const char* where) {
    if (k < 0) {
      throw ValueError(detail::message(where, "k must be >= 0, got ", k), static_cast<double>(k));
    }
  }

  /// The pieces of `line` between separators: fastText's readWord set (with NUL) or C's isspace.
  static std::vector<std::string_view> split(std::string_view line, bool nul_separates) {
    auto sep = [&](char c) {
      return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || c == '\n' ||
             (nul_separates && c == '\0');
    };
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && sep(line[i])) ++i;
      const std::size_t start = i;
      while (i < line.size() && !sep(line[i])) ++i;
      if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
  }

  /// x += input row r (fastText's addInputVector). scratch[dim].
  void add_input_row(TokenId r, float* x, float* scratch) const {
    if (f_.quant_input) {
      f_.qinput.add_row(r, x, scratch);
    } else {
      Eigen::Map<RowVector<float>>(x, dim()) += f_.input.row(r);
    }
  }

  /// fastText's getWordVector into out[dim].
  void vector_into(std::string_view word, float* out) const {
    const Index d = dim();
    Eigen::Map<RowVector<float>> v(out, d);
    v.setZero();
    std::size_t n = 0;
    if (f_.quant_input) {
      Scratch s(d);
      f_.index.for_each_id(word, [&](TokenId r) {
        f_.qinput.add_row(r, out, s.data());
        ++n;
      });
    } else {
      // The rows are requested as their ids come out of the hashing and added in batches (in
      // their order, so the sum is fastText's): the misses of a word's rows overlap.
      const float* rows = f_.input.data();
      const Index row_bytes = d * static_cast<Index>(sizeof(float));
      std::array<TokenId, 64> batch;
      std::size_t pending = 0;
      auto flush = [&] {
        for (std::size_t i = 0; i < pending; ++i) {
          v += Eigen::Map<const RowVector<float>>(rows + batch[i] * d, d);
        }
        pending = 0;
      };
      f_.index.for_each_id(word, [&](TokenId r) {
        detail::prefetch_row(rows + r * d, row_bytes, row_bytes);
        batch[pending++] = r;
        ++n;
        if (pending == batch.size()) flush();
      });
      flush();
    }
    if (n > 0) v *= static_cast<float>(1.0 / static_cast<double>(n));
  }

  /// The word vector times the float of 1 / its norm, or zeros (precomputeWordVectors).
  void unit_vector(std::string_view word, float* out, float* scratch) const {
    const Index d = dim();
    vector_into(word, out);
    const float n = detail::norm(out, scratch, d);
    if (n > 0) {
      detail::scaled(out, static_cast<float>(1.0 / static_cast<double>(n)), scratch, d);
      for (Index j = 0; j < d; ++j) out[j] = 0.0f + scratch[j];
    } else {
      std::fill(out, out + d, 0.0f);
    }
  }

  const detail::RowPanels& panels() const {
    std::call_once(lazy_->once, [&] {
      detail::RowPanels& p = lazy_->panels;
      p.assign(nwords(), dim());
      Scratch s(2 * dim());
      for (Index i = 0; i < nwords(); ++i) {
        unit_vector(f_.index.token(i), s.data(), s.data() + dim());
        p.set_row(i, s.data());
      }
    });
    return lazy_->panels;
  }

  /// fastText's getNN: every word but the banned ones scored dot(unit word, q) / |q| (|q| taken
  /// as 1 below the double 1e-8, so at the float 1e-8f too), the best k kept by fastText's heap.
  std::vector<FastTextNeighbour> best_words(const float* q, Index k, std::array<TokenId, 3> ban,
                                            const char* where) const {
    const Index d = dim();
    const detail::RowPanels& p = panels();
    std::vector<float> scores(static_cast<std::size_t>(nwords()));
    std::vector<float> scratch(static_cast<std::size_t>(d * detail::RowPanels::lanes));
    p.dots(q, scores.data(), scratch.data());
    float qnorm = detail::norm(q, scratch.data(), d);
    if (static_cast<double>(std::abs(qnorm)) < 1e-8) qnorm = 1.0f;  // fastText compares in double
    const auto want = static_cast<std::size_t>(std::min<Index>(k, nwords()));
    std::vector<detail::ScoredLabel> heap;
    heap.reserve(want + 1);
    for (Index i = 0; i < nwords() && want > 0; ++i) {
      if (i == ban[0] || i == ban[1] || i == ban[2]) continue;
      const float similarity = scores[static_cast<std::size_t>(i)] / qnorm;
      if (std::isnan(similarity)) {  // a NaN dot product, or an infinite one over an infinite |q|
        throw ValueError(detail::message(where, "the similarity of word ", i,
                                         " is NaN (the model's values overflow)"),
                         similarity);
      }
      if (heap.size() == want && similarity < heap.front().first) continue;
      detail::heap_push(heap, want, similarity, static_cast<std::int32_t>(i));
    }
    std::sort_heap(heap.begin(), heap.end(), detail::score_greater);
    std::vector<FastTextNeighbour> out;
    out.reserve(heap.size());
    for (const auto& [score, id] : heap) out.push_back({id, score});
    return out;
  }

  detail::FastTextFile f_;
  std::vector<detail::HuffmanNode> tree_;
  std::unique_ptr<Lazy> lazy_ = std::make_unique<Lazy>();
};

/// Loads a fastText model: a .bin of format version 12 (or 11) or a quantized .ftz, as fastText's
/// loadModel reads it (little-endian, its field order), validated completely before anything is
/// returned. Supervised, skipgram and cbow models of every loss; a pruned quantized dictionary.
/// Shapes: input[nwords + bucket (or kept), dim], output[labels (supervised) or words, dim].
/// Throws: FormatError naming the file, the byte offset and what was expected there: a wrong
/// magic number or version; arguments fastText could not have written (dim < 1, negative
/// minn/maxn/bucket/wordNgrams, an unknown loss or model, bucket 0 with n-grams to hash); a
/// dictionary whose counts disagree or that leaves both matrices without a row, an entry with an
/// empty or repeated word, a negative count, a word typed as a label or the reverse; a prune index
/// with a bucket or row out of range or repeated, or without quantization; a matrix whose rows or
/// columns are not the dictionary's and dim, a quantizer whose shape does not divide dim as
/// fastText does, a code size that is not rows x sub-quantizers; a flag that is not 0 or 1; a NaN
/// or infinite value (unless allowed); the file ending early, or bytes after the output matrix.
/// Nothing is returned on a throw. Memory: the dictionary is parsed from a read-only mapping, the
/// matrices read once into their own memory (not mapped: fastText stores them unaligned), so the
/// process holds one copy of the file. Complexity: one pass over the file.
inline FastTextModel load_fasttext(const std::string& path, const FastTextLoadOptions& options) {
  return FastTextModel(detail::parse_fasttext(path, options));
}

}  // namespace ember::inline EMBER_ISA::io

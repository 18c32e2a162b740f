/// The reader of fastText model files (.bin, .ftz) behind io::load_fasttext: a bounds-checked
/// cursor over the mapped file, the readers of its dense and product-quantized matrices, and
/// parse_fasttext, which validates the whole file into a FastTextFile.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/byteorder.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/fasttext_arithmetic.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/io/fasttext_args.hpp"
#include "ember/keys/subwords.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// The public call a fastText file is read for, which its FileError messages name.
inline constexpr const char* fasttext_call = "io::load_fasttext";

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
      if (r < 0) {
        const int error = errno;
        const std::uint64_t at = offset + done + got;
        throw FileError(text(fasttext_call, ": cannot read \"", in.path(), "\" at byte ", at, ": ",
                             std::strerror(error)),
                        in.path(), at, std::error_code(error, std::generic_category()));
      }
      if (r == 0) in.fail(offset + done + got, "the file shrank while it was read");
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

/// Parses and validates a whole fastText model file (load_fasttext): NaN and infinite values are
/// refused unless `allow_non_finite`.
inline FastTextFile parse_fasttext(const std::string& path, bool allow_non_finite) {
  // The file is opened once: the dictionary is parsed from a mapping of that descriptor and the
  // matrices are read through it with pread, so both come from the same file even if the path
  // is replaced meanwhile.
  const ReadOnlyFile fd(path, fasttext_call);
  const MappedFile file(fd, fasttext_call);
  FastTextReader in(file.data(), file.size(), fd.fd(), path);
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
    out.qinput =
        read_quantized(in, input_rows, a.dim, allow_non_finite, "the input matrix", input_rows_are);
  } else {
    out.input =
        read_dense(in, input_rows, a.dim, allow_non_finite, "the input matrix", input_rows_are);
  }

  // ---- output matrix
  out.quant_output = in.flag("the output matrix's quantization flag") && out.quant_input;
  const Index output_rows = supervised ? Index{nlabels} : Index{nwords};
  const std::string output_rows_are =
      std::to_string(output_rows) + (supervised ? " (the labels)" : " (the words)");
  if (out.quant_output) {
    out.qoutput = read_quantized(in, output_rows, a.dim, allow_non_finite, "the output matrix",
                                 output_rows_are);
  } else {
    out.output =
        read_dense(in, output_rows, a.dim, allow_non_finite, "the output matrix", output_rows_are);
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

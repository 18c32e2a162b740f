/// fastText models: load_fasttext reads a .bin (format version 12, or 11) or .ftz
/// (product-quantized) file, validated completely, into a FastTextModel, which answers as fastText
/// does: word vectors bit for bit, sentence vectors, subwords, nearest neighbours, analogies and
/// predictions.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/fasttext_arithmetic.hpp"
#include "ember/io/detail/fasttext_reader.hpp"
#include "ember/io/fasttext_args.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/keys/subwords.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

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
  return FastTextModel(detail::parse_fasttext(path, options.allow_non_finite));
}

}  // namespace ember::inline EMBER_ISA::io

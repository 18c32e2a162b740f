/// Embedding-space queries: cosine similarity, top-k nearest neighbours (single and batched,
/// blocked GEMM + partial sort) and word analogies (3CosAdd, 3CosMul), matching gensim's
/// KeyedVectors.most_similar / most_similar_cosmul.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/keys/vocabulary.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::query {

/// One answer of a query: a row id and its score (cosine, or the 3CosMul objective).
template <class T>
struct Neighbour {
  TokenId id;
  T score;
  friend bool operator==(const Neighbour&, const Neighbour&) = default;
};

/// Restrictions of a nearest-neighbour or analogy query.
struct QueryOptions {
  /// Ids never returned (besides the query's own ids, always excluded).
  std::vector<TokenId> exclude;
  /// Only rows [0, restrict_to) are candidates (gensim's restrict_vocab); 0 means all rows.
  Index restrict_to = 0;
};

/// The analogy objective: 3CosAdd (gensim most_similar) or 3CosMul (most_similar_cosmul).
enum class AnalogyMethod { add, mul };

/// Cosine similarity a·b / (|a| |b|) of two vectors; 0 when either has zero norm (never NaN).
/// Throws: ShapeError if the sizes differ.
template <class DerivedA, class DerivedB>
[[nodiscard]] typename DerivedA::Scalar cosine(const Eigen::MatrixBase<DerivedA>& a,
                                               const Eigen::MatrixBase<DerivedB>& b) {
  using T = typename DerivedA::Scalar;
  detail::check_extent("cosine", "b", 1, a.size(), b.size(), "the size of a");
  const T na = a.norm(), nb = b.norm();
  if (na == T(0) || nb == T(0)) return T(0);
  return a.derived().reshaped().dot(b.derived().reshaped().template cast<T>()) / (na * nb);
}

/// Cosine similarity of rows i and j of a row-major table; 0 if either row has zero norm.
/// Throws: IndexError if i or j is outside [0, table.rows()).
template <class Derived>
[[nodiscard]] typename Derived::Scalar cosine(const Eigen::MatrixBase<Derived>& table, TokenId i,
                                              TokenId j) {
  const TokenId ids[2] = {i, j};
  ember::detail::check_ids(std::span<const TokenId>(ids), table.rows(), "cosine");
  return cosine(table.row(i), table.row(j));
}

/// A query index over a V x d table: it stores the rows normalised to unit length once (a V x d
/// copy, plus the norms), then answers cosine, nearest-neighbour and analogy queries by one GEMV
/// (one query) or a blocked GEMM (a batch) over the normalised rows and a partial sort.
///
/// Conventions (gensim 4's KeyedVectors, whose answers the tests reproduce to 1e-5): results are
/// sorted by descending cosine, ties by ascending id; a query given by id or word excludes that
/// id, one given by vector only options.exclude. Zero-norm rows stay zero, so their cosine with
/// everything is 0 (gensim yields NaN): no query ever returns NaN; the table must be finite.
/// Const members may be called concurrently.
///
/// Example:
/// ```cpp
/// auto wv = ember::io::load_word2vec_binary<float>("vectors.bin");
/// ember::query::Neighbours<float> nn(wv.vectors, wv.vocab);
/// for (auto [id, score] : nn.nearest("king", 10))
///   std::cout << nn.word(id) << '\t' << score << '\n';
/// auto queen = nn.analogy("man", "king", "woman", 1);   // king - man + woman
/// ```
template <class T>
class Neighbours {
  static_assert(Scalar<T>, "ember::query::Neighbours<T>: T must be float or double");

 public:
  /// Rows per block of the batched GEMM: block_rows x batch scores live at once.
  static constexpr Index block_rows = 4096;

  /// Indexes `table` (copied and normalised). Complexity: O(V·d).
  /// Throws: ShapeError if the table has no columns; ValueError naming the row and column of a
  /// non-finite value.
  template <class Derived>
  explicit Neighbours(const Eigen::MatrixBase<Derived>& table) : unit_(table.template cast<T>()) {
    init();
  }

  /// Indexes `table` with `vocab` naming its rows, so queries can use words.
  /// Throws: as above; ShapeError if vocab.size() != table.rows().
  template <class Derived>
  Neighbours(const Eigen::MatrixBase<Derived>& table, Vocabulary vocab)
      : unit_(table.template cast<T>()), vocab_(std::move(vocab)) {
    detail::check_extent("Neighbours", "table", 0, vocab_->size(), unit_.rows(), "vocab size");
    init();
  }

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return unit_.rows(); }
  /// Row width d.
  [[nodiscard]] Index d_model() const noexcept { return unit_.cols(); }
  /// The unit-normalised rows (zero rows stay zero), V x d.
  [[nodiscard]] const RowMatrix<T>& normalized() const noexcept { return unit_; }
  /// The L2 norm of each original row, V.
  [[nodiscard]] const Eigen::Matrix<T, Eigen::Dynamic, 1>& norms() const noexcept { return norms_; }
  /// The vocabulary, if one was given.
  [[nodiscard]] const Vocabulary* vocabulary() const noexcept {
    return vocab_ ? &*vocab_ : nullptr;
  }

  /// The id of `word`. Throws: KeyError naming the word; ValueError without a vocabulary.
  [[nodiscard]] TokenId id(std::string_view word) const { return vocab().id(word); }
  /// The word of `id`. Throws: IndexError; ValueError without a vocabulary.
  [[nodiscard]] const std::string& word(TokenId id) const { return vocab().token(id); }

  /// Cosine similarity of rows a and b (0 if either is a zero row).
  /// Throws: IndexError if an id is outside [0, vocab_size()).
  [[nodiscard]] T similarity(TokenId a, TokenId b) const {
    const TokenId ids[2] = {a, b};
    check(ids, "Neighbours::similarity");
    return unit_.row(a).dot(unit_.row(b));
  }
  /// Cosine similarity of two words. Throws: KeyError for an unknown word.
  [[nodiscard]] T similarity(std::string_view a, std::string_view b) const {
    return similarity(id(a), id(b));
  }

  /// The min(k, candidates) rows most similar to row `id` by cosine, best first, `id` excluded.
  /// Throws: IndexError for a bad id (query or exclusion); ValueError for k < 0 or restrict_to
  /// outside [0, vocab_size()]. Complexity: O(V·d) GEMV + O(V + k log k) selection.
  [[nodiscard]] std::vector<Neighbour<T>> nearest(TokenId id, Index k,
                                                  const QueryOptions& options = {}) const {
    const TokenId ids[1] = {id};
    check(ids, "Neighbours::nearest");
    return most_similar(std::span<const TokenId>(ids), {}, k, options);
  }
  /// nearest(id(word), k, options). Throws: KeyError naming an unknown word.
  [[nodiscard]] std::vector<Neighbour<T>> nearest(std::string_view word, Index k,
                                                  const QueryOptions& options = {}) const {
    return nearest(id(word), k, options);
  }
  /// The k rows most similar to the vector `query` (of any norm; excludes only options.exclude).
  /// Throws: ShapeError if query.size() != d_model(); ValueError for a non-finite query, k < 0 or
  /// a bad restrict_to; IndexError for a bad exclusion id.
  template <class Derived>
  [[nodiscard]] std::vector<Neighbour<T>> nearest(const Eigen::MatrixBase<Derived>& query, Index k,
                                                  const QueryOptions& options = {}) const {
    detail::check_extent("Neighbours::nearest", "query", 1, d_model(), query.size(), "d_model");
    RowMatrix<T> q = query.template cast<T>().reshaped(1, d_model());
    check_finite_query(q, "Neighbours::nearest");
    return std::move(nearest_batch(q, k, options).front());
  }

  /// For each row of `queries` (n x d), its k nearest rows: the blocked-GEMM path.
  /// Shapes: queries[n, d] -> n lists of min(k, candidates) results. Throws: as nearest(vector).
  /// Complexity: O(n·V·d) in blocks of block_rows table rows (one GEMM each), O(n·V) selection;
  /// extra memory O(n·block_rows).
  template <class Derived>
  [[nodiscard]] std::vector<std::vector<Neighbour<T>>> nearest_batch(
      const Eigen::MatrixBase<Derived>& queries, Index k, const QueryOptions& options = {}) const {
    detail::check_extent("Neighbours::nearest_batch", "queries", 1, d_model(), queries.cols(),
                         "d_model");
    const Index n = candidates("Neighbours::nearest_batch", k, options);
    RowMatrix<T> q = queries.template cast<T>();
    check_finite_query(q, "Neighbours::nearest_batch");
    normalize_rows(q);
    std::vector<TokenId> excluded = options.exclude;
    std::sort(excluded.begin(), excluded.end());
    std::vector<std::vector<Neighbour<T>>> best(static_cast<std::size_t>(q.rows()));
    RowMatrix<T> scores;
    std::vector<Neighbour<T>> pool;
    for (Index start = 0; start < n; start += block_rows) {
      const Index b = std::min(block_rows, n - start);
      scores.noalias() = q * unit_.middleRows(start, b).transpose();
      for (Index i = 0; i < q.rows(); ++i) {
        auto& keep = best[static_cast<std::size_t>(i)];
        pool = std::move(keep);
        collect(scores.row(i).data(), start, b, excluded, pool);
        select(pool, k);
        keep = std::move(pool);
      }
    }
    return best;
  }

  /// gensim's most_similar(positive, negative, topn=k): rows ranked by cosine with the unit mean of
  /// the unit vectors of `positive` (+1) and `negative` (-1), the query ids excluded (3CosAdd).
  /// Throws: ValueError if positive and negative are both empty, k < 0 or restrict_to is bad;
  /// IndexError for a bad id.
  [[nodiscard]] std::vector<Neighbour<T>> most_similar(std::span<const TokenId> positive,
                                                       std::span<const TokenId> negative, Index k,
                                                       const QueryOptions& options = {}) const {
    constexpr const char* where = "Neighbours::most_similar";
    check(positive, where);
    check(negative, where);
    if (positive.empty() && negative.empty()) {
      throw ValueError(ember::detail::message(where, "cannot compute similarity with no input"),
                       0.0);
    }
    const Index n = candidates(where, k, options);
    // Sum in the table's type, in the order gensim does: positives then negatives.
    RowVector<T> mean = RowVector<T>::Zero(d_model());
    for (TokenId p : positive) mean += unit_.row(p);
    for (TokenId m : negative) mean -= unit_.row(m);
    mean /= static_cast<T>(positive.size() + negative.size());
    const T len = mean.norm();
    if (len > T(0)) mean /= len;
    Eigen::Matrix<T, Eigen::Dynamic, 1> scores = unit_.topRows(n) * mean.transpose();
    return finish(scores, positive, negative, k, options);
  }

  /// gensim's most_similar_cosmul (3CosMul, Levy & Goldberg 2014): rows ranked by
  /// prod_p s(row, p) / (prod_n s(row, n) + 1e-6), s = (1 + cos) / 2, the query ids excluded.
  /// Throws: ValueError if positive is empty, k < 0 or restrict_to is bad; IndexError for a bad id.
  [[nodiscard]] std::vector<Neighbour<T>> most_similar_cosmul(
      std::span<const TokenId> positive, std::span<const TokenId> negative, Index k,
      const QueryOptions& options = {}) const {
    constexpr const char* where = "Neighbours::most_similar_cosmul";
    check(positive, where);
    check(negative, where);
    if (positive.empty()) {
      throw ValueError(
          ember::detail::message(where, "cannot compute similarity with no positive input"), 0.0);
    }
    const Index n = candidates(where, k, options);
    RowMatrix<T> terms(static_cast<Index>(positive.size() + negative.size()), d_model());
    Index t = 0;
    for (TokenId p : positive) terms.row(t++) = unit_.row(p);
    for (TokenId m : negative) terms.row(t++) = unit_.row(m);
    const RowMatrix<T> cos = unit_.topRows(n) * terms.transpose();  // n x (P + N)
    const auto np = static_cast<Index>(positive.size());
    Eigen::Matrix<T, Eigen::Dynamic, 1> scores(n);
    for (Index r = 0; r < n; ++r) {
      T num = T(1), den = T(1);
      for (Index j = 0; j < np; ++j) num *= (T(1) + cos(r, j)) / T(2);
      for (Index j = np; j < cos.cols(); ++j) den *= (T(1) + cos(r, j)) / T(2);
      scores(r) = num / (den + T(1e-6));
    }
    return finish(scores, positive, negative, k, options);
  }

  /// "a is to b as c is to ?": most_similar({b, c}, {a}) (add) or most_similar_cosmul (mul).
  [[nodiscard]] std::vector<Neighbour<T>> analogy(TokenId a, TokenId b, TokenId c, Index k,
                                                  AnalogyMethod method = AnalogyMethod::add,
                                                  const QueryOptions& options = {}) const {
    const TokenId pos[2] = {b, c};
    const TokenId neg[1] = {a};
    return method == AnalogyMethod::add ? most_similar(pos, neg, k, options)
                                        : most_similar_cosmul(pos, neg, k, options);
  }
  /// analogy() by words. Throws: KeyError naming an unknown word.
  [[nodiscard]] std::vector<Neighbour<T>> analogy(std::string_view a, std::string_view b,
                                                  std::string_view c, Index k,
                                                  AnalogyMethod method = AnalogyMethod::add,
                                                  const QueryOptions& options = {}) const {
    return analogy(id(a), id(b), id(c), k, method, options);
  }

 private:
  const Vocabulary& vocab() const {
    if (!vocab_) {
      throw ValueError("Neighbours: no vocabulary was given; query by id or vector instead", 0.0);
    }
    return *vocab_;
  }

  void init() {
    detail::check_positive_size("Neighbours", "d_model (table columns)", unit_.cols());
    const auto n = static_cast<std::size_t>(unit_.size());
    if (const std::size_t k = ember::detail::first_non_finite(unit_.data(), n); k < n) {
      const auto cols = static_cast<std::size_t>(unit_.cols());
      throw ValueError(ember::detail::message("Neighbours", "table value at row ", k / cols,
                                              ", column ", k % cols, " is not finite"),
                       static_cast<double>(unit_.data()[k]));
    }
    norms_ = unit_.rowwise().norm();
    normalize_rows(unit_);
  }

  static void normalize_rows(RowMatrix<T>& m) {
    for (Index r = 0; r < m.rows(); ++r) {
      const T len = m.row(r).norm();
      if (len > T(0)) m.row(r) /= len;
    }
  }

  static void check_finite_query(const RowMatrix<T>& q, ember::detail::Where where) {
    const auto n = static_cast<std::size_t>(q.size());
    if (const std::size_t i = ember::detail::first_non_finite(q.data(), n); i < n) {
      throw ValueError(ember::detail::message(where, "query value ", i, " is not finite"),
                       static_cast<double>(q.data()[i]));
    }
  }

  void check(std::span<const TokenId> ids, ember::detail::Where where) const {
    ember::detail::check_ids(ids, vocab_size(), where);
  }

  /// Validates k and the options; returns the number of candidate rows.
  Index candidates(ember::detail::Where where, Index k, const QueryOptions& options) const {
    if (k < 0)
      throw ValueError(ember::detail::message(where, "k must be >= 0, got ", k),
                       static_cast<double>(k));
    if (options.restrict_to < 0 || options.restrict_to > vocab_size()) {
      throw ValueError(ember::detail::message(where, "restrict_to ", options.restrict_to,
                                              " is outside [0, ", vocab_size(), "]"),
                       static_cast<double>(options.restrict_to));
    }
    check(options.exclude, where);
    return options.restrict_to == 0 ? vocab_size() : options.restrict_to;
  }

  static bool better(const Neighbour<T>& a, const Neighbour<T>& b) noexcept {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  }

  /// Appends rows [start, start + b) with their scores to `pool`, skipping sorted `excluded`.
  static void collect(const T* scores, Index start, Index b, const std::vector<TokenId>& excluded,
                      std::vector<Neighbour<T>>& pool) {
    auto ex = std::lower_bound(excluded.begin(), excluded.end(), start);
    for (Index j = 0; j < b; ++j) {
      const TokenId id = start + j;
      while (ex != excluded.end() && *ex < id) ++ex;
      if (ex != excluded.end() && *ex == id) continue;
      pool.push_back({id, scores[j]});
    }
  }

  /// Keeps the best k of `pool`, sorted best first.
  static void select(std::vector<Neighbour<T>>& pool, Index k) {
    const auto kk = static_cast<std::size_t>(k);
    if (pool.size() > kk) {
      std::nth_element(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(kk), pool.end(),
                       better);
      pool.resize(kk);
    }
    std::sort(pool.begin(), pool.end(), better);
  }

  std::vector<Neighbour<T>> finish(const Eigen::Matrix<T, Eigen::Dynamic, 1>& scores,
                                   std::span<const TokenId> positive,
                                   std::span<const TokenId> negative, Index k,
                                   const QueryOptions& options) const {
    std::vector<TokenId> excluded(options.exclude);
    excluded.insert(excluded.end(), positive.begin(), positive.end());
    excluded.insert(excluded.end(), negative.begin(), negative.end());
    std::sort(excluded.begin(), excluded.end());
    std::vector<Neighbour<T>> pool;
    pool.reserve(static_cast<std::size_t>(scores.size()));
    collect(scores.data(), 0, scores.size(), excluded, pool);
    select(pool, k);
    return pool;
  }

  RowMatrix<T> unit_;
  Eigen::Matrix<T, Eigen::Dynamic, 1> norms_;
  std::optional<Vocabulary> vocab_;
};

}  // namespace ember::inline EMBER_ISA::query

// Slow, obviously correct reference versions of ember's queries (query/similarity.hpp), in double,
// following gensim 4's formulas; plus the reader of gensim's golden answers.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ember/types.hpp>

namespace ember_test {

struct RefNeighbour {
  ember::TokenId id;
  double score;
};

inline double ref_cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  if (na == 0 || nb == 0) return 0;
  return dot / (std::sqrt(na) * std::sqrt(nb));
}

template <class T>
std::vector<double> ref_row(const ember::RowMatrix<T>& m, ember::Index r) {
  std::vector<double> v(static_cast<std::size_t>(m.cols()));
  for (ember::Index c = 0; c < m.cols(); ++c)
    v[static_cast<std::size_t>(c)] = static_cast<double>(m(r, c));
  return v;
}

inline std::vector<double> ref_unit(std::vector<double> v) {
  double n = 0;
  for (double x : v) n += x * x;
  n = std::sqrt(n);
  if (n > 0)
    for (double& x : v) x /= n;
  return v;
}

/// Full sort of all candidate rows (score desc, id asc), excluded ids dropped, first k kept.
inline std::vector<RefNeighbour> ref_top(const std::vector<double>& scores,
                                         const std::set<ember::TokenId>& excluded, std::size_t k) {
  std::vector<RefNeighbour> all;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (!excluded.count(static_cast<ember::TokenId>(i)))
      all.push_back({static_cast<ember::TokenId>(i), scores[i]});
  }
  std::sort(all.begin(), all.end(), [](const RefNeighbour& a, const RefNeighbour& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  if (all.size() > k) all.resize(k);
  return all;
}

/// gensim most_similar(positive, negative, topn=k, restrict_vocab=restrict).
template <class T>
std::vector<RefNeighbour> ref_most_similar(const ember::RowMatrix<T>& table,
                                           const std::vector<ember::TokenId>& pos,
                                           const std::vector<ember::TokenId>& neg, std::size_t k,
                                           ember::Index restrict = 0) {
  std::vector<double> mean(static_cast<std::size_t>(table.cols()), 0.0);
  for (auto p : pos) {
    auto u = ref_unit(ref_row(table, p));
    for (std::size_t i = 0; i < u.size(); ++i) mean[i] += u[i];
  }
  for (auto n : neg) {
    auto u = ref_unit(ref_row(table, n));
    for (std::size_t i = 0; i < u.size(); ++i) mean[i] -= u[i];
  }
  const ember::Index rows = restrict ? restrict : table.rows();
  std::vector<double> scores(static_cast<std::size_t>(rows));
  for (ember::Index r = 0; r < rows; ++r)
    scores[static_cast<std::size_t>(r)] = ref_cosine(ref_row(table, r), mean);
  std::set<ember::TokenId> ex(pos.begin(), pos.end());
  ex.insert(neg.begin(), neg.end());
  return ref_top(scores, ex, k);
}

/// gensim most_similar_cosmul(positive, negative, topn=k).
template <class T>
std::vector<RefNeighbour> ref_most_similar_cosmul(const ember::RowMatrix<T>& table,
                                                  const std::vector<ember::TokenId>& pos,
                                                  const std::vector<ember::TokenId>& neg,
                                                  std::size_t k) {
  std::vector<double> scores(static_cast<std::size_t>(table.rows()));
  for (ember::Index r = 0; r < table.rows(); ++r) {
    const auto row = ref_row(table, r);
    double num = 1, den = 1;
    for (auto p : pos) num *= (1 + ref_cosine(row, ref_row(table, p))) / 2;
    for (auto n : neg) den *= (1 + ref_cosine(row, ref_row(table, n))) / 2;
    scores[static_cast<std::size_t>(r)] = num / (den + 1e-6);
  }
  std::set<ember::TokenId> ex(pos.begin(), pos.end());
  ex.insert(neg.begin(), neg.end());
  return ref_top(scores, ex, k);
}

/// One query recorded by tests/data/make_gensim_fixtures.py with gensim's answers.
struct GensimQuery {
  std::string kind;  // most_similar | most_similar_cosmul | similarity
  std::vector<std::string> positive, negative;
  int topn = 0;
  int restrict_vocab = 0;
  std::vector<std::pair<std::string, double>> answers;
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

inline std::vector<GensimQuery> read_gensim_answers(const std::string& path) {
  std::ifstream in(path);
  std::vector<GensimQuery> out;
  std::string line;
  std::string last_key;
  while (std::getline(in, line)) {
    const auto f = split(line, '\t');
    if (f.size() != 8) continue;
    const std::string key = f[0] + "|" + f[1] + "|" + f[2] + "|" + f[3] + "|" + f[4];
    if (key != last_key || f[5] == "0") {
      GensimQuery q;
      q.kind = f[0];
      q.positive = f[1].empty() ? std::vector<std::string>{} : split(f[1], ',');
      q.negative = f[2].empty() ? std::vector<std::string>{} : split(f[2], ',');
      q.topn = std::stoi(f[3]);
      q.restrict_vocab = std::stoi(f[4]);
      out.push_back(q);
      last_key = key;
    }
    out.back().answers.emplace_back(f[6], std::stod(f[7]));
  }
  return out;
}

}  // namespace ember_test

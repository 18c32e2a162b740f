// The plain reference of ember::top_k (top_k.hpp): a stable sort of each row's columns, and the
// reader of torch.topk's golden answers (tests/data/top_k/).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <ember/types.hpp>

namespace ember_test {

/// values[n, k] and indices[n, k] of the reference top-k.
template <class T>
struct RefTopK {
  ember::RowMatrix<T> values;
  ember::RowMatrix<ember::TokenId> indices;
};

/// Each row's columns stable-sorted by descending value with NaN first: the k first of that order.
template <class T>
RefTopK<T> ref_top_k(const ember::RowMatrix<T>& x, ember::Index k) {
  RefTopK<T> out{ember::RowMatrix<T>(x.rows(), k), ember::RowMatrix<ember::TokenId>(x.rows(), k)};
  std::vector<ember::Index> order(static_cast<std::size_t>(x.cols()));
  for (ember::Index i = 0; i < x.rows(); ++i) {
    std::iota(order.begin(), order.end(), ember::Index{0});
    std::stable_sort(order.begin(), order.end(), [&](ember::Index a, ember::Index b) {
      const T va = x(i, a), vb = x(i, b);
      if (std::isnan(va) || std::isnan(vb)) return std::isnan(va) && !std::isnan(vb);
      return va > vb;
    });
    for (ember::Index j = 0; j < k; ++j) {
      out.values(i, j) = x(i, order[static_cast<std::size_t>(j)]);
      out.indices(i, j) = order[static_cast<std::size_t>(j)];
    }
  }
  return out;
}

/// The bits of a float or double, to compare values exactly (NaN payloads and signed zeros too).
template <class T>
auto bits_of(T v) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U u;
  std::memcpy(&u, &v, sizeof v);
  return u;
}

/// tests/data/top_k/torch_topk.txt: float inputs and torch.topk's values and indices per k.
struct TorchTopK {
  ember::RowMatrix<float> x;
  std::map<ember::Index, RefTopK<float>> by_k;
};

inline TorchTopK load_torch_top_k(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string word;
  auto skip_comments = [&] {
    while (in >> std::ws && in.peek() == '#') std::getline(in, word);
  };
  auto read_float = [&] {
    std::string hex;
    in >> hex;
    const auto b = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  };
  skip_comments();
  ember::Index rows = 0, cols = 0;
  in >> word >> rows >> word >> cols;
  TorchTopK t;
  t.x.resize(rows, cols);
  for (ember::Index i = 0; i < rows; ++i)
    for (ember::Index j = 0; j < cols; ++j) t.x(i, j) = read_float();
  ember::Index k = 0;
  while (in >> word >> k) {
    RefTopK<float> r{ember::RowMatrix<float>(rows, k), ember::RowMatrix<ember::TokenId>(rows, k)};
    for (ember::Index i = 0; i < rows; ++i) {
      for (ember::Index j = 0; j < k; ++j) r.values(i, j) = read_float();
      for (ember::Index j = 0; j < k; ++j) in >> r.indices(i, j);
    }
    t.by_k.emplace(k, std::move(r));
  }
  if (t.by_k.empty()) throw std::runtime_error("no answers in " + path);
  return t;
}

}  // namespace ember_test

/// fastText's arithmetic, replicated operation for operation for FastTextModel: float sums in
/// fastText's order with every product rounded before it is added, its product quantizer, its
/// sigmoid table and shifted log, its Huffman tree and its top-k heaps.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

// fastText adds products one at a time (x += a * b, compiled without fused multiply-adds). Here a
// product is stored by one loop and added by another, so no compiler can contract the two into
// an FMA (which rounds once where fastText rounds twice) whatever the target: the results are
// fastText's bits on every build.

/// out[i] = a[i] * s for i < n (each product rounded to float).
inline void scaled(const float* a, float s, float* out, Index n) noexcept {
  for (Index i = 0; i < n; ++i) out[i] = a[i] * s;
}

/// out[i] = a[i] * b[i] for i < n.
inline void products(const float* a, const float* b, float* out, Index n) noexcept {
  for (Index i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

/// x[i] += a[i] for i < n.
inline void add_to(float* x, const float* a, Index n) noexcept {
  for (Index i = 0; i < n; ++i) x[i] += a[i];
}

/// The float sum of a[0..n) from 0, in order (fastText's dot products and norms).
[[nodiscard]] inline float ordered_sum(const float* a, Index n) noexcept {
  float s = 0.0f;
  for (Index i = 0; i < n; ++i) s += a[i];
  return s;
}

/// fastText's Vector::addVector(v, s): x += s · v, the products rounded. scratch[n].
inline void add_scaled(float* x, const float* v, float s, float* scratch, Index n) noexcept {
  scaled(v, s, scratch, n);
  add_to(x, scratch, n);
}

/// fastText's DenseMatrix::dotRow: the float sum of a[i] · b[i] in order. scratch[n].
[[nodiscard]] inline float dot(const float* a, const float* b, float* scratch, Index n) noexcept {
  products(a, b, scratch, n);
  return ordered_sum(scratch, n);
}

/// fastText's Vector::norm: sqrt of the float sum of squares in order. scratch[n].
[[nodiscard]] inline float norm(const float* a, float* scratch, Index n) noexcept {
  products(a, a, scratch, n);
  return std::sqrt(ordered_sum(scratch, n));
}

/// fastText's ProductQuantizer: `nsubq` sub-vectors of `dsub` values (the last of `lastdsub`),
/// each coded by one byte among 256 centroids. centroids[dim · 256] in fastText's layout.
struct ProductQuantizer {
  static constexpr Index ksub = 256;
  std::int32_t dim = 0;
  std::int32_t nsubq = 0;
  std::int32_t dsub = 0;
  std::int32_t lastdsub = 0;
  std::vector<float> centroids;

  /// The centroid `code` of sub-quantizer m (get_centroids).
  [[nodiscard]] const float* centroid(std::int32_t m, std::uint8_t code) const {
    EMBER_ASSERT(m >= 0 && m < nsubq);
    const auto sub = static_cast<std::size_t>(m);
    const auto c = static_cast<std::size_t>(code);
    const auto ds = static_cast<std::size_t>(dsub);
    if (m == nsubq - 1) return &centroids[sub * 256 * ds + c * static_cast<std::size_t>(lastdsub)];
    return &centroids[(sub * 256 + c) * ds];
  }

  /// out[dim] = alpha · the decoded row of `code` (addcode into a zero vector, the products
  /// rounded; alpha == 1 copies the centroids, as 1 · c is c).
  void decode(const std::uint8_t* code, float alpha, float* out) const {
    for (std::int32_t m = 0; m < nsubq; ++m) {
      const float* c = centroid(m, code[m]);
      const std::int32_t d = m == nsubq - 1 ? lastdsub : dsub;
      float* o = out + static_cast<std::ptrdiff_t>(m) * dsub;
      for (std::int32_t k = 0; k < d; ++k) o[k] = c[k];
    }
    if (alpha != 1.0f) scaled(out, alpha, out, dim);
  }
};

/// fastText's QuantMatrix: rows coded by a ProductQuantizer, each optionally scaled by its norm,
/// itself coded by a one-dimensional quantizer (qnorm).
struct QuantizedRows {
  Index rows = 0;
  Index cols = 0;
  bool qnorm = false;
  std::vector<std::uint8_t> codes;  // rows x nsubq
  ProductQuantizer pq;
  std::vector<std::uint8_t> norm_codes;  // rows (qnorm)
  ProductQuantizer npq;                  // dim 1 (qnorm)

  [[nodiscard]] float row_norm(Index i) const {
    return qnorm ? npq.centroid(0, norm_codes[static_cast<std::size_t>(i)])[0] : 1.0f;
  }
  [[nodiscard]] const std::uint8_t* code(Index i) const noexcept {
    return codes.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(pq.nsubq);
  }
  /// x += row i (QuantMatrix::addRowToVector). scratch[cols].
  void add_row(Index i, float* x, float* scratch) const {
    pq.decode(code(i), row_norm(i), scratch);
    add_to(x, scratch, cols);
  }
  /// The dot product of row i and x (QuantMatrix::dotRow: ProductQuantizer::mulcode's sum in
  /// order, then times the norm). scratch[cols].
  [[nodiscard]] float dot_row(Index i, const float* x, float* scratch) const {
    pq.decode(code(i), 1.0f, scratch);
    return dot(scratch, x, scratch, cols) * row_norm(i);
  }
};

// ---- the losses' prediction arithmetic ------------------------------------------------------

/// fastText's std_log: log(x + 1e-5) in double, rounded to float.
[[nodiscard]] inline float std_log(float x) noexcept {
  return static_cast<float>(std::log(static_cast<double>(x) + 1e-5));
}

/// fastText's sigmoid table (Loss::t_sigmoid_): 513 values over [-8, 8].
[[nodiscard]] inline const std::array<float, 513>& sigmoid_table() {
  static const std::array<float, 513> table = [] {
    std::array<float, 513> t{};
    for (std::size_t i = 0; i < t.size(); ++i) {
      const float x = static_cast<float>(static_cast<std::int64_t>(i) * 16) / 512.0f - 8.0f;
      t[i] = static_cast<float>(1.0 / (1.0 + static_cast<double>(std::exp(-x))));
    }
    return t;
  }();
  return table;
}

/// fastText's Loss::sigmoid: 0 below -8, 1 above 8, else the table entry below x. x not NaN.
[[nodiscard]] inline float table_sigmoid(float x) {
  if (x < -8.0f) return 0.0f;
  if (x > 8.0f) return 1.0f;
  const auto i = static_cast<std::size_t>((x + 8.0f) * 512.0f / 8.0f / 2.0f);
  return sigmoid_table()[i];
}

/// A prediction of fastText's heaps: (log-probability, label index).
using ScoredLabel = std::pair<float, std::int32_t>;

/// fastText's comparePairs: a min-heap on the score, ties in whatever order the heap leaves them
/// (the std heap algorithms are used exactly as fastText uses them, so the order is fastText's
/// with the same standard library).
[[nodiscard]] inline bool score_greater(const ScoredLabel& a, const ScoredLabel& b) noexcept {
  return a.first > b.first;
}

/// Pushes (score, label) into the k-heap, dropping the worst beyond k (fastText's heap step).
inline void heap_push(std::vector<ScoredLabel>& heap, std::size_t k, float score,
                      std::int32_t label) {
  heap.emplace_back(score, label);
  std::push_heap(heap.begin(), heap.end(), score_greater);
  if (heap.size() > k) {
    std::pop_heap(heap.begin(), heap.end(), score_greater);
    heap.pop_back();
  }
}

/// fastText's Loss::findKBest over output[n] (probabilities), threshold and k as it takes them.
inline void find_k_best(std::span<const float> output, std::size_t k, float threshold,
                        std::vector<ScoredLabel>& heap) {
  for (std::size_t i = 0; i < output.size(); ++i) {
    if (output[i] < threshold) continue;
    if (heap.size() == k && std_log(output[i]) < heap.front().first) continue;
    heap_push(heap, k, std_log(output[i]), static_cast<std::int32_t>(i));
  }
}

/// fastText's SoftmaxLoss::computeOutput on the scores out[n]: exp(x - max) in double, rounded
/// to float, summed in float in order, then divided.
inline void softmax_in_place(std::span<float> out) noexcept {
  if (out.empty()) return;
  float max = out[0];
  for (const float v : out) max = std::max(v, max);
  float z = 0.0f;
  for (float& v : out) {
    v = static_cast<float>(std::exp(static_cast<double>(v - max)));
    z += v;
  }
  for (float& v : out) v /= z;
}

/// A node of fastText's Huffman tree (HierarchicalSoftmaxLoss::Node).
struct HuffmanNode {
  std::int32_t parent = -1;
  std::int32_t left = -1;
  std::int32_t right = -1;
  std::int64_t count = 0;
  bool binary = false;
};

/// fastText's HierarchicalSoftmaxLoss::buildTree over counts[osz] (leaves 0 .. osz-1, internal
/// nodes after them, the root last): the two-queue Huffman construction as fastText runs it.
[[nodiscard]] inline std::vector<HuffmanNode> build_huffman_tree(
    std::span<const std::int64_t> counts) {
  const auto osz = static_cast<std::int32_t>(counts.size());
  if (osz == 0) return {};
  std::vector<HuffmanNode> tree(static_cast<std::size_t>(2 * osz - 1));
  for (auto& n : tree) n.count = static_cast<std::int64_t>(1e15);
  for (std::int32_t i = 0; i < osz; ++i)
    tree[static_cast<std::size_t>(i)].count = counts[static_cast<std::size_t>(i)];
  std::int32_t leaf = osz - 1;
  std::int32_t node = osz;
  for (std::int32_t i = osz; i < 2 * osz - 1; ++i) {
    std::int32_t mini[2] = {0, 0};
    for (auto& m : mini) {
      if (leaf >= 0 &&
          tree[static_cast<std::size_t>(leaf)].count < tree[static_cast<std::size_t>(node)].count) {
        m = leaf--;
      } else {
        m = node++;
      }
    }
    auto& n = tree[static_cast<std::size_t>(i)];
    n.left = mini[0];
    n.right = mini[1];
    n.count = tree[static_cast<std::size_t>(mini[0])].count +
              tree[static_cast<std::size_t>(mini[1])].count;
    tree[static_cast<std::size_t>(mini[0])].parent = i;
    tree[static_cast<std::size_t>(mini[1])].parent = i;
    tree[static_cast<std::size_t>(mini[1])].binary = true;
  }
  return tree;
}

/// fastText's HierarchicalSoftmaxLoss::dfs from the root, as an explicit stack visiting the nodes
/// in the recursion's order (left subtree first) with the same pruning: a branch whose
/// log-probability is below std_log(threshold), or below the worst of a full heap, is cut.
/// `node_dot(i)` is the dot product of the hidden vector with output row i (internal node osz+i).
template <class NodeDot>
void huffman_predict(const std::vector<HuffmanNode>& tree, std::size_t k, float threshold,
                     NodeDot&& node_dot, std::vector<ScoredLabel>& heap) {
  if (tree.empty()) return;
  const auto osz = static_cast<std::int32_t>((tree.size() + 1) / 2);
  const float floor = std_log(threshold);
  std::vector<std::pair<std::int32_t, float>> stack{
      {static_cast<std::int32_t>(tree.size()) - 1, 0.0f}};
  while (!stack.empty()) {
    const auto [node, score] = stack.back();
    stack.pop_back();
    if (score < floor) continue;
    if (heap.size() == k && score < heap.front().first) continue;
    const HuffmanNode& n = tree[static_cast<std::size_t>(node)];
    if (n.left == -1 && n.right == -1) {
      heap_push(heap, k, score, node);
      continue;
    }
    float f = node_dot(node - osz);
    f = static_cast<float>(1.0 / static_cast<double>(1.0f + std::exp(-f)));
    stack.emplace_back(n.right, score + std_log(f));
    stack.emplace_back(n.left, score + std_log(static_cast<float>(1.0 - static_cast<double>(f))));
  }
}

// ---- nearest neighbours -----------------------------------------------------------------------

/// Word vectors laid out for fastText's nearest-neighbour scores: blocks of `lanes` rows stored
/// column by column (block b, column j: rows b·lanes .. b·lanes + lanes - 1), so one pass scores
/// `lanes` rows at once while each row's dot product keeps fastText's order.
struct RowPanels {
  static constexpr Index lanes = 16;
  Index rows = 0;
  Index cols = 0;
  std::vector<float> data;  // ceil(rows / lanes) x cols x lanes, padding rows zero

  void assign(Index r, Index c) {
    rows = r;
    cols = c;
    data.assign(static_cast<std::size_t>((r + lanes - 1) / lanes * lanes * c), 0.0f);
  }
  void set_row(Index r, const float* v) noexcept {
    float* base = data.data() + static_cast<std::size_t>(r / lanes * lanes * cols + r % lanes);
    for (Index j = 0; j < cols; ++j) base[static_cast<std::size_t>(j * lanes)] = v[j];
  }
  /// scores[rows] = the dot product of each row with q[cols], each the float sum of its
  /// products in column order (fastText's dotRow). scratch[cols · lanes].
  void dots(const float* q, float* scores, float* scratch) const noexcept {
    const Index blocks = (rows + lanes - 1) / lanes;
    for (Index b = 0; b < blocks; ++b) {
      const float* p = data.data() + static_cast<std::size_t>(b * lanes * cols);
      for (Index j = 0; j < cols; ++j) {  // the products, rounded, in their own pass
        const float qj = q[j];
        for (Index l = 0; l < lanes; ++l) scratch[j * lanes + l] = p[j * lanes + l] * qj;
      }
      float acc[lanes] = {};
      for (Index j = 0; j < cols; ++j) {
        for (Index l = 0; l < lanes; ++l) acc[l] += scratch[j * lanes + l];
      }
      const Index n = std::min(lanes, rows - b * lanes);
      for (Index l = 0; l < n; ++l) scores[b * lanes + l] = acc[l];
    }
  }
};

}  // namespace ember::inline EMBER_ISA::detail

// Builds fastText model files in memory (the layout of fastText's saveModel, version 12), noting
// where each field starts, so tests can load hand-made models and truncate or corrupt a file at
// every field: tests/test_io_fasttext.cpp.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "support/io_files.hpp"
#include "support/io_malformed.hpp"

namespace ember_test {

/// A product quantizer as stored: dim, nsubq, dsub, lastdsub, dim x 256 centroids.
struct PqSpec {
  std::int32_t dim = 0, nsubq = 0, dsub = 0, lastdsub = 0;
  std::vector<float> centroids;
};

/// A matrix: dense values, or a QuantMatrix (codes, quantizer, optional norms).
struct MatrixSpec {
  std::int64_t rows = 0, cols = 0;
  std::vector<float> values;  // dense
  bool quantized = false;
  bool qnorm = false;
  std::vector<std::uint8_t> codes;
  PqSpec pq;
  std::vector<std::uint8_t> norm_codes;
  PqSpec npq;
};

struct FastTextSpec {
  std::int32_t magic = 793712314, version = 12;
  std::int32_t dim = 3, ws = 5, epoch = 5, min_count = 1, neg = 5, word_ngrams = 2, loss = 3,
               model = 3, bucket = 4, minn = 2, maxn = 3, lr_update_rate = 100;
  double t = 1e-4;
  std::vector<std::pair<std::string, std::int64_t>> words, labels;
  std::int64_t ntokens = 10;
  std::optional<std::vector<std::pair<std::int32_t, std::int32_t>>> prune;
  MatrixSpec input, output;
  bool qout = false;
};

/// A field of a written file: its name, first byte and size.
struct Field {
  std::string name;
  std::size_t offset = 0;
  std::size_t size = 0;
};

struct WrittenModel {
  Bytes bytes;
  std::vector<Field> fields;
  [[nodiscard]] const Field& field(const std::string& name) const {
    for (const auto& f : fields)
      if (f.name == name) return f;
    FAIL("no field " << name);
    return fields.front();
  }
};

class ModelWriter {
 public:
  template <class V>
  void put(const std::string& name, V v) {
    mark(name, sizeof(V));
    append_le(out_.bytes, v);
  }
  void put_bytes(const std::string& name, const std::vector<std::uint8_t>& b) {
    mark(name, b.size());
    out_.bytes.insert(out_.bytes.end(), b.begin(), b.end());
  }
  void put_floats(const std::string& name, const std::vector<float>& v) {
    mark(name, 4 * v.size());
    for (const float f : v) append_le(out_.bytes, f);
  }
  void put_string(const std::string& name, const std::string& s) {
    mark(name, s.size() + 1);
    out_.bytes.insert(out_.bytes.end(), s.begin(), s.end());
    out_.bytes.push_back(0);
  }
  WrittenModel take() { return std::move(out_); }

 private:
  void mark(const std::string& name, std::size_t size) {
    out_.fields.push_back({name, out_.bytes.size(), size});
  }
  WrittenModel out_;
};

inline void write_pq(ModelWriter& w, const std::string& name, const PqSpec& pq) {
  w.put(name + ".dim", pq.dim);
  w.put(name + ".nsubq", pq.nsubq);
  w.put(name + ".dsub", pq.dsub);
  w.put(name + ".lastdsub", pq.lastdsub);
  w.put_floats(name + ".centroids", pq.centroids);
}

inline void write_matrix(ModelWriter& w, const std::string& name, const MatrixSpec& m) {
  if (!m.quantized) {
    w.put(name + ".rows", m.rows);
    w.put(name + ".cols", m.cols);
    w.put_floats(name + ".values", m.values);
    return;
  }
  w.put(name + ".qnorm", static_cast<std::uint8_t>(m.qnorm));
  w.put(name + ".rows", m.rows);
  w.put(name + ".cols", m.cols);
  w.put(name + ".codesize", static_cast<std::int32_t>(m.codes.size()));
  w.put_bytes(name + ".codes", m.codes);
  write_pq(w, name + ".pq", m.pq);
  if (m.qnorm) {
    w.put_bytes(name + ".norm_codes", m.norm_codes);
    write_pq(w, name + ".npq", m.npq);
  }
}

inline WrittenModel write_model(const FastTextSpec& s) {
  ModelWriter w;
  w.put("magic", s.magic);
  w.put("version", s.version);
  w.put("args.dim", s.dim);
  w.put("args.ws", s.ws);
  w.put("args.epoch", s.epoch);
  w.put("args.minCount", s.min_count);
  w.put("args.neg", s.neg);
  w.put("args.wordNgrams", s.word_ngrams);
  w.put("args.loss", s.loss);
  w.put("args.model", s.model);
  w.put("args.bucket", s.bucket);
  w.put("args.minn", s.minn);
  w.put("args.maxn", s.maxn);
  w.put("args.lrUpdateRate", s.lr_update_rate);
  w.put("args.t", s.t);
  const auto nwords = static_cast<std::int32_t>(s.words.size());
  const auto nlabels = static_cast<std::int32_t>(s.labels.size());
  w.put("dict.size", nwords + nlabels);
  w.put("dict.nwords", nwords);
  w.put("dict.nlabels", nlabels);
  w.put("dict.ntokens", s.ntokens);
  w.put("dict.prune_size", s.prune ? static_cast<std::int64_t>(s.prune->size()) : std::int64_t{-1});
  std::size_t i = 0;
  for (const auto* list : {&s.words, &s.labels}) {
    for (const auto& [word, count] : *list) {
      const std::string e = "entry" + std::to_string(i++);
      w.put_string(e + ".word", word);
      w.put(e + ".count", count);
      w.put(e + ".type", static_cast<std::int8_t>(list == &s.words ? 0 : 1));
    }
  }
  if (s.prune) {
    std::size_t p = 0;
    for (const auto& [key, value] : *s.prune) {
      w.put("prune" + std::to_string(p) + ".bucket", key);
      w.put("prune" + std::to_string(p++) + ".row", value);
    }
  }
  w.put("input.quant", static_cast<std::uint8_t>(s.input.quantized));
  write_matrix(w, "input", s.input);
  w.put("output.quant", static_cast<std::uint8_t>(s.qout));
  write_matrix(w, "output", s.output);
  return w.take();
}

/// A dense matrix rows x cols with values start, start + step, ...
inline MatrixSpec dense_matrix(std::int64_t rows, std::int64_t cols, float start, float step) {
  MatrixSpec m;
  m.rows = rows;
  m.cols = cols;
  for (std::int64_t i = 0; i < rows * cols; ++i)
    m.values.push_back(start + step * static_cast<float>(i % 97) - 0.01f * static_cast<float>(i));
  return m;
}

/// A quantizer of `dim` values in sub-vectors of dsub with centroids start, start + step, ...
inline PqSpec pq_spec(std::int32_t dim, std::int32_t dsub, float start, float step) {
  PqSpec pq;
  pq.dim = dim;
  pq.dsub = dsub;
  pq.nsubq = dim / dsub + (dim % dsub ? 1 : 0);
  pq.lastdsub = dim % dsub ? dim % dsub : dsub;
  for (std::int32_t i = 0; i < dim * 256; ++i)
    pq.centroids.push_back(start + step * static_cast<float>(i % 251));
  return pq;
}

/// A quantized matrix rows x dim with codes (r * 7 + m * 3) % 256 and norms when qnorm.
inline MatrixSpec quantized_matrix(std::int64_t rows, std::int32_t dim, std::int32_t dsub,
                                   bool qnorm) {
  MatrixSpec m;
  m.rows = rows;
  m.cols = dim;
  m.quantized = true;
  m.qnorm = qnorm;
  m.pq = pq_spec(dim, dsub, -0.5f, 0.004f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int32_t s = 0; s < m.pq.nsubq; ++s)
      m.codes.push_back(static_cast<std::uint8_t>((r * 7 + s * 3) % 256));
  if (qnorm) {
    m.npq = pq_spec(1, 1, 0.5f, 0.01f);
    for (std::int64_t r = 0; r < rows; ++r)
      m.norm_codes.push_back(static_cast<std::uint8_t>((r * 11) % 256));
  }
  return m;
}

/// A small supervised softmax model: 3 words, 2 labels, bucket 4, dim 3 (dense).
inline FastTextSpec small_supervised() {
  FastTextSpec s;
  s.words = {{"</s>", 4}, {"ab", 3}, {"\xc3\xa7\xc3\xa9", 2}};
  s.labels = {{"__label__x", 3}, {"__label__y", 1}};
  s.input = dense_matrix(3 + 4, 3, -0.4f, 0.013f);
  s.output = dense_matrix(2, 3, 0.3f, -0.021f);
  return s;
}

/// The same model quantized: input and output (qout) with norms, a pruned dictionary keeping
/// buckets 3 and 1.
inline FastTextSpec small_quantized() {
  FastTextSpec s = small_supervised();
  s.prune = std::vector<std::pair<std::int32_t, std::int32_t>>{{3, 0}, {1, 1}};
  s.input = quantized_matrix(3 + 2, 3, 2, true);
  s.output = quantized_matrix(2, 3, 2, true);
  s.qout = true;
  return s;
}

}  // namespace ember_test

// The small GGUF fixture committed as tests/data/tiny.gguf (read by examples/gguf_info and seeding
// the gguf fuzzer): written by ember's GgufWriter from tables drawn with ember::Random, so
// tests/test_io_gguf.cpp can check that the committed bytes are what the writer produces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/io/ggml_type.hpp"
#include "ember/io/gguf_writer.hpp"
#include "ember/random.hpp"
#include "ember/types.hpp"

namespace ember_test {

/// A rows x cols table of N(0, 1) values from ember::Random(seed): the data GGUF tests store.
inline ember::RowMatrix<float> gguf_normal_table(ember::Index rows, ember::Index cols,
                                                 std::uint64_t seed) {
  ember::Random rng(seed);
  ember::RowMatrix<float> t(rows, cols);
  for (ember::Index i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(rng.normal());
  return t;
}

/// The tables of tiny.gguf, kept alive while the writer runs.
struct TinyGgufTables {
  ember::RowMatrix<float> token_embd;  // 8 x 256, stored as q4_K
  ember::RowMatrix<float> position;    // 4 x 64, q8_0
  ember::RowMatrix<double> norm;       // 1 x 32, f32
  ember::RowMatrix<float> head;        // 2 x 32, bf16

  TinyGgufTables() : token_embd(8, 256), position(4, 64), norm(1, 32), head(2, 32) {
    ember::Random rng(2026);
    for (ember::Index i = 0; i < token_embd.size(); ++i)
      token_embd.data()[i] = static_cast<float>(rng.normal(0.0, 0.02));
    for (ember::Index i = 0; i < position.size(); ++i)
      position.data()[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
    for (ember::Index i = 0; i < norm.size(); ++i)
      norm.data()[i] = 1.0 + 0.125 * static_cast<double>(i);
    for (ember::Index i = 0; i < head.size(); ++i)
      head.data()[i] = static_cast<float>(rng.normal());
  }
};

/// Writes tiny.gguf to `path`: metadata of most GGUF types (a token list with a repeated token
/// included) and four tensors of four types.
inline void write_tiny_gguf(const std::string& path) {
  const TinyGgufTables t;
  ember::io::GgufWriter w;
  w.metadata("general.architecture", "ember")
      .metadata("general.name", "tiny")
      .metadata("general.alignment", std::uint32_t{32})
      .metadata("ember.context_length", std::uint32_t{4})
      .metadata("ember.embedding_length", std::uint64_t{256})
      .metadata("ember.rope.freq_base", 10000.0f)
      .metadata("ember.norm_eps", 1e-5)
      .metadata("ember.tied", true)
      .metadata("ember.offset", std::int16_t{-3})
      .metadata("tokenizer.ggml.model", "gpt2")
      .metadata("tokenizer.ggml.tokens",
                std::vector<std::string>{"<unk>", "<s>", "</s>", "the", "cat", "sat", "the", "mat"})
      .metadata("tokenizer.ggml.scores",
                std::vector<float>{0.f, 0.f, 0.f, -1.f, -2.f, -3.f, -1.f, -4.f})
      .metadata("tokenizer.ggml.token_type", std::vector<std::int32_t>{2, 3, 3, 1, 1, 1, 1, 1});
  w.add("token_embd.weight", t.token_embd, ember::io::GgmlType::Q4_K)
      .add("position_embd.weight", t.position, ember::io::GgmlType::Q8_0)
      .add("output_norm.weight", t.norm, ember::io::GgmlType::F32)
      .add("output.weight", t.head, ember::io::GgmlType::BF16);
  w.save(path);
}

}  // namespace ember_test

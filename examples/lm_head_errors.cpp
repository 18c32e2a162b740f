// lm_head_errors: the error of tied logits in each LogitsMode, the table of docs/lm_head.md. A
// 512 x 1024 table and 8 hidden rows drawn from N(0, 1) (ember::Random, seeds 1 and 2); each
// ggml type is written to a GGUF file and viewed in place, the 16-bit and int8 tables encode the
// table in memory. Relative L2 errors of the logits against float64 products of the float table:
// exact, quantized_hidden, and quantized_hidden against exact (what rounding the hidden rows adds).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include <ember/embedding.hpp>
#include <ember/io/gguf.hpp>
#include <ember/io/gguf_writer.hpp>
#include <ember/quantized.hpp>
#include <ember/random.hpp>
#include <ember/reduced.hpp>

namespace {

ember::RowMatrix<float> normal(ember::Index rows, ember::Index cols, std::uint64_t seed) {
  ember::Random rng(seed);
  ember::RowMatrix<float> m(rows, cols);
  for (ember::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.normal());
  return m;
}

double rel(const ember::RowMatrix<float>& z, const Eigen::MatrixXd& ref) {
  return (z.cast<double>() - ref).norm() / ref.norm();
}

template <class Table>
void row(const char* name, const Table& t, const ember::RowMatrix<float>& h,
         const Eigen::MatrixXd& ref) {
  const ember::RowMatrix<float> exact = t.logits(h);
  const ember::RowMatrix<float> quantized = t.logits(h, ember::LogitsMode::quantized_hidden);
  std::printf("| `%s` | %.2e | %.2e | %.2e |\n", name, rel(exact, ref), rel(quantized, ref),
              rel(quantized, exact.cast<double>()));
}

}  // namespace

int main() {
  const ember::RowMatrix<float> w = normal(512, 1024, 1);
  const ember::RowMatrix<float> h = normal(8, 1024, 2);
  const Eigen::MatrixXd ref = h.cast<double>() * w.cast<double>().transpose();
  std::printf("| table | exact vs float64 | quantized_hidden vs float64 | quantized vs exact |\n");
  row("Embedding<float>", ember::Embedding<float>(w, ember::LookupScale::none()), h, ref);
  row("HalfEmbedding", ember::HalfEmbedding::from_float(w), h, ref);
  row("ReducedEmbedding<bfloat16>", ember::ReducedEmbedding<Eigen::bfloat16>::from_float(w), h,
      ref);
  row("QuantizedEmbedding", ember::QuantizedEmbedding(w), h, ref);
  const char* path = "lm_head_errors.gguf";
  using ember::GgmlType;
  for (const GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q6_K,
        GgmlType::Q5_1, GgmlType::Q5_0, GgmlType::Q5_K, GgmlType::Q4_1, GgmlType::Q4_0,
        GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q2_K}) {
    ember::io::GgufWriter writer;
    writer.add("w", w, t);
    writer.save(path);
    const ember::GgmlEmbeddingView view =
        ember::io::GgufFile(path).table("w", ember::LookupScale::none());
    row(std::string(to_string(t)).c_str(), view, h, ref);
  }
  std::filesystem::remove(path);
}

// ggml_errors: the storage error of every ggml type ember encodes, the table of docs/gguf.md.
// 64 x 4096 values drawn from N(0, 1) (ember::Random, seed 11) are written to a GGUF file as each
// type, read back, and compared with the originals: max |error| and rms error per value.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <ember/io/gguf.hpp>
#include <ember/io/gguf_writer.hpp>
#include <ember/random.hpp>

int main() {
  using ember::GgmlType;
  ember::Random rng(11);
  ember::RowMatrix<float> x(64, 4096);
  for (ember::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.normal());
  const char* path = "ggml_errors.gguf";
  std::printf("| type | block | bytes per row at d = 4096 | max |error| | rms error |\n");
  for (const GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q6_K,
        GgmlType::Q5_1, GgmlType::Q5_0, GgmlType::Q5_K, GgmlType::Q4_1, GgmlType::Q4_0,
        GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q2_K}) {
    ember::io::GgufWriter w;
    w.add("x", x, t);
    w.save(path);
    const ember::RowMatrix<float> y = ember::io::GgufFile(path).load<float>("x");
    double worst = 0;
    double sq = 0;
    for (ember::Index i = 0; i < x.size(); ++i) {
      const double e = std::fabs(double{y.data()[i]} - double{x.data()[i]});
      worst = std::max(worst, e);
      sq += e * e;
    }
    std::printf("| `%s` | %lld | %lld | %.4f | %.4f |\n", std::string(to_string(t)).c_str(),
                static_cast<long long>(ember::ggml_block_size(t)),
                static_cast<long long>(ember::ggml_row_size(t, 4096)), worst,
                std::sqrt(sq / static_cast<double>(x.size())));
  }
  std::filesystem::remove(path);
}

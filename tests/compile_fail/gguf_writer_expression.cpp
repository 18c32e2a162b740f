// Must NOT compile: GgufWriter::add keeps a reference to the rows until save(), so an Eigen
// expression (here RowMatrix<float>::Zero) is refused with a static_assert that says what to pass
// instead. Run by ctest as compile_fail.gguf_writer_expression.
// SPDX-License-Identifier: MIT
#include "ember/io/gguf_writer.hpp"

int main() {
  ember::io::GgufWriter w;
  w.add("token_embd.weight", ember::RowMatrix<float>::Zero(4, 256), ember::io::GgmlType::Q4_K);
  return 0;
}

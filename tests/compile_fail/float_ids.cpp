// Must NOT compile: floating-point token ids are rejected at compile time with the message
// "ember: token ids must be a contiguous range of integers ..." (detail::with_ids in
// ember/detail/checks.hpp). The build runs this as a ctest that tries to compile this file and
// expects failure with that message; it is not part of ember_tests.
// SPDX-License-Identifier: MIT
#include "ember/embedding.hpp"

#include <vector>

int main() {
  const ember::Embedding<float> emb(10, 4);
  const auto out = emb.forward(std::vector<double>{1.0});
  return static_cast<int>(out.rows());
}

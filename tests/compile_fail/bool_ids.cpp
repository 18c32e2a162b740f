// Must NOT compile: bool token ids are rejected at compile time with ember's id message
// (detail::with_ids in ember/detail/checks.hpp), although every other integer type (std::size_t
// too) is accepted. Run by ctest as compile_fail.bool_ids.
// SPDX-License-Identifier: MIT
#include "ember/embedding.hpp"

#include <array>

int main() {
  const ember::Embedding<float> emb(10, 4);
  const std::array<bool, 2> ids{true, false};
  const auto out = emb.forward(ids);
  return static_cast<int>(out.rows());
}

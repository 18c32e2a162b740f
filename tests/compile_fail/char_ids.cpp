// Must NOT compile: characters (a std::string) are not token ids; rejected at compile time with
// ember's id message (detail::with_ids in ember/detail/checks.hpp). Run by ctest as
// compile_fail.char_ids.
// SPDX-License-Identifier: MIT
#include "ember/bag.hpp"

#include <string>
#include <vector>

int main() {
  const ember::EmbeddingBag<float> bag(10, 4, ember::BagMode::sum);
  const std::string ids = "abc";
  const auto out = bag.forward(ids, std::vector<int>{0});
  return static_cast<int>(out.rows());
}

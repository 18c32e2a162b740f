#include <cstdint>
#include <vector>

#include <ember/ember.hpp>

int main() {
  ember::Embedding<float> e(10, 4, 1);
  auto x = e.forward(std::vector<std::int64_t>{1, 2, 3});
  return x.rows() == 3 && x.cols() == 4 ? 0 : 1;
}

#include <cstdio>
#include <string>

#include <ember/io/npy.hpp>
#include <ember/io/safetensors.hpp>
#include <ember/query/similarity.hpp>

int main() {
  ember::RowMatrix<float> t(3, 2);
  t << 1, 0, 0, 1, 1, 1;
  const std::string path = "consumer_io.safetensors";
  ember::io::save_safetensors(path, "wte.weight", t);
  const auto back = ember::io::load_safetensors<float>(path, "wte.weight");
  std::remove(path.c_str());
  const ember::query::Neighbours<float> nn(back);
  return back == t && nn.nearest(0, 1)[0].id == 2 ? 0 : 1;
}

// fasttext_vectors: loads a fastText model (.bin or .ftz) and prints, for words it has seen and
// words it has not, how fastText builds their vectors (own row + character n-grams), the start of
// each vector and its nearest words, exactly as fastText answers.
//
//   fasttext_vectors MODEL [WORD...]
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <ember/io/fasttext.hpp>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fasttext_vectors MODEL [WORD...]\n");
    return 2;
  }
  std::vector<std::string> words(argv + 2, argv + argc);
  if (words.empty()) words = {"cat", "chats", "東京", "東京都", "🍕", "pizzas"};
  try {
    const ember::io::FastTextModel model = ember::io::load_fasttext(argv[1]);
    std::printf("%s model: %ld words, %ld buckets, dim %ld, n-grams of %d to %d characters\n",
                ember::io::to_string(model.args().model), static_cast<long>(model.nwords()),
                static_cast<long>(model.subword_index().bucket()), static_cast<long>(model.dim()),
                model.args().minn, model.args().maxn);
    for (const std::string& w : words) {
      const ember::Subwords s = model.subwords(w);
      std::printf("\n%s (%s): %zu rows:", w.c_str(),
                  model.word_id(w) ? "seen" : "unseen, n-grams only", s.ids.size());
      for (std::size_t i = 0; i < s.ngrams.size() && i < 4; ++i)
        std::printf(" %s", s.ngrams[i].c_str());
      std::printf(" ...\n  vector:");
      const ember::RowVector<float> v = model.word_vector(w);
      for (ember::Index j = 0; j < 4; ++j) std::printf(" %+.4f", static_cast<double>(v(j)));
      std::printf(" ...\n  nearest:");
      for (const auto& [id, score] : model.nearest(w, 3)) {
        std::printf(" %s %.4f", std::string(model.word(id)).c_str(), static_cast<double>(score));
      }
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fasttext_vectors: %s\n", e.what());
    return 1;
  }
  return 0;
}

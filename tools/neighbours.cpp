// ember-neighbours: nearest neighbours and analogies over a word2vec / GloVe file, as gensim
// answers them, over the token table of a GGUF model (token_embd.weight, named by the file's
// tokenizer tokens), or over a fastText model (.bin / .ftz) as fastText answers them: any word,
// seen or not, through its subwords (fastText's nn and analogies; --cosmul ranks the model's unit
// word vectors as gensim would).
//
//   ember-neighbours FILE --format w2v-bin|w2v-text|glove|gguf|fasttext [--topn K] WORD...
//   ember-neighbours FILE --format ... [--topn K] [--cosmul] --analogy A B C   (B - A + C)
//
// Prints `word<TAB>score` lines (score to 6 decimals); exits non-zero on any error. A new format is
// an entry of `kFormats` and a branch of the loader in main.
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <ember/io/fasttext.hpp>
#include <ember/io/gguf.hpp>
#include <ember/io/word2vec.hpp>
#include <ember/query/similarity.hpp>

namespace {

// The --format names and what they read (the --help text).
constexpr std::pair<const char*, const char*> kFormats[] = {
    {"w2v-bin", "word2vec binary (.bin)"},
    {"w2v-text", "word2vec text (a header line V d)"},
    {"glove", "GloVe text (no header line)"},
    {"gguf", "the token table of a GGUF model, named by its tokenizer tokens"},
    {"fasttext", "a fastText model (.bin, .ftz): any word, through its subwords"},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Nearest neighbours and analogies by cosine similarity (gensim's most_similar).",
               "ember-neighbours"};
  std::vector<std::string> format_names;
  std::string format_help = "file format:";
  for (const auto& [name, what] : kFormats) {
    format_names.emplace_back(name);
    format_help += std::string("\n  ") + name + ": " + what;
  }
  std::string file, format;
  int topn = 10;
  std::vector<std::string> words, analogy;
  bool cosmul = false;
  app.add_option("FILE", file, "word-vector file")->required();
  app.add_option("--format", format, format_help)->required()->check(CLI::IsMember(format_names));
  app.add_option("--topn", topn, "neighbours per query (default 10)")->check(CLI::PositiveNumber);
  auto* a = app.add_option("--analogy", analogy, "A B C: A is to B as C is to ? (B - A + C)")
                ->expected(3);
  app.add_flag("--cosmul", cosmul, "rank analogies by 3CosMul instead of 3CosAdd")->needs(a);
  app.add_option("WORD", words, "words to find neighbours of")->excludes(a);
  try {
    app.parse(argc, argv);
    if (words.empty() && analogy.empty())
      throw CLI::ValidationError("give at least one WORD or --analogy A B C");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fputs(app.help().c_str(), stderr);
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    if (format == "fasttext" && !cosmul) {
      const ember::io::FastTextModel model = ember::io::load_fasttext(file);
      auto print = [&](const std::vector<ember::io::FastTextNeighbour>& result) {
        for (const auto& r : result) {
          std::printf("%s\t%.6f\n", std::string(model.word(r.id)).c_str(),
                      static_cast<double>(r.score));
        }
      };
      if (!analogy.empty()) {
        // fastText's analogies(x, y, z) ranks x - y + z: B - A + C is analogies(B, A, C).
        print(model.analogies(analogy[1], analogy[0], analogy[2], topn));
      } else {
        for (const auto& w : words) print(model.nearest(w, topn));
      }
      return 0;
    }
    const ember::query::Neighbours<float> nn = [&] {  // the table of `format`, named
      if (format == "fasttext") {  // --cosmul: the model's unit word vectors, ranked by ember
        const ember::io::FastTextModel model = ember::io::load_fasttext(file);
        return ember::query::Neighbours<float>(model.normalized_word_vectors(), model.vocabulary());
      }
      if (format == "gguf") {
        // The token table as ggml stores it (any type ember decodes), decoded once to be indexed.
        const ember::io::GgufFile gguf(file);
        const ember::GgmlEmbeddingView tokens = gguf.table("token_embd.weight");
        return ember::query::Neighbours<float>(tokens.dequantize(), gguf.vocabulary());
      }
      const auto fmt = format == "w2v-bin"    ? ember::io::WordFormat::word2vec_binary
                       : format == "w2v-text" ? ember::io::WordFormat::word2vec_text
                                              : ember::io::WordFormat::glove;
      auto wv = ember::io::load_word_vectors<float>(file, fmt);
      return ember::query::Neighbours<float>(wv.vectors, std::move(wv.vocab));
    }();
    auto print = [&](const std::vector<ember::query::Neighbour<float>>& result) {
      for (const auto& r : result)
        std::printf("%s\t%.6f\n", nn.word(r.id).c_str(), static_cast<double>(r.score));
    };
    if (!analogy.empty()) {
      const auto method =
          cosmul ? ember::query::AnalogyMethod::mul : ember::query::AnalogyMethod::add;
      print(nn.analogy(analogy[0], analogy[1], analogy[2], topn, method));
    } else {
      for (const auto& w : words) print(nn.nearest(w, topn));
    }
  } catch (const ember::KeyError& e) {
    std::fprintf(stderr, "ember-neighbours: word '%s' is not in the vocabulary of %s\n",
                 e.key().c_str(), file.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-neighbours: %s\n", e.what());
    return 1;
  }
  return 0;
}

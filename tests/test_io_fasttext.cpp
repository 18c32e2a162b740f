// Tests of ember/io/fasttext.hpp: models trained by fastText itself (tests/data/fasttext/, with
// the commands that made them) answer as fastText does; word vectors against the plain reference;
// hand-built models (dense, quantized, pruned) load; every truncation and a corruption of every
// field is a FormatError naming the file and the byte; errors at the door; ember's query and bag
// code over a model. "[.live]" compares with the installed fastText (the ctest fasttext.live).
// SPDX-License-Identifier: MIT
#include "ember/io/fasttext.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#if defined(__linux__)
#include <sys/inotify.h>
#include <unistd.h>
#endif

#include "ember/bag.hpp"
#include "ember/embedding_view.hpp"
#include "ember/query/similarity.hpp"

#include "fuzz/harness.hpp"
#include "support/error_checks.hpp"
#include "support/fasttext_answers.hpp"
#include "support/fasttext_writer.hpp"
#include "support/io_files.hpp"
#include "support/io_malformed.hpp"
#include "support/subwords_reference.hpp"

using ember::Index;
using ember::RowVector;
using ember::TokenId;
using ember::io::FastTextLoss;
using ember::io::FastTextModel;
using ember::io::FastTextModelType;
using ember::io::load_fasttext;

namespace {

std::string fixture(const std::string& name) {
  return std::string(EMBER_TEST_DATA_DIR) + "/fasttext/" + name;
}

/// The reference dictionary of a loaded model (its words, labels and arguments).
ember_test::ReferenceDictionary reference_of(const FastTextModel& m) {
  ember_test::ReferenceDictionary ref;
  for (Index i = 0; i < m.nwords(); ++i) ref.entries.emplace_back(m.word(i));
  for (Index i = 0; i < m.nlabels(); ++i) ref.entries.emplace_back(m.label(i));
  ref.nwords = static_cast<std::size_t>(m.nwords());
  ref.minn = m.args().minn;
  ref.maxn = m.args().maxn;
  ref.bucket = m.args().bucket;
  ref.word_ngrams = m.args().word_ngrams;
  return ref;
}

/// Random words made of pieces of the fixtures' vocabulary and other scripts.
std::vector<std::string> probe_words(std::size_t n, std::uint32_t seed) {
  const std::vector<std::string> pieces = {"ca", "fé", "chat", "東", "京", "🍕", "ラー", "メン",
                                           "ñ",  "zu", "mé",   "ri", "é",  "x", "\xFF", "🙂"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string w;
    for (std::uint32_t k = 0, len = 1 + rng() % 4; k < len; ++k) w += pieces[rng() % pieces.size()];
    out.push_back(w);
  }
  return out;
}

bool same_bits(const RowVector<float>& a, const RowVector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.size())) == 0;
}

FastTextModel load_bytes(const ember_test::ScratchDir& dir, const ember_test::Bytes& bytes,
                         const std::string& name = "model.bin") {
  ember_test::write_bytes(dir.file(name), bytes);
  return load_fasttext(dir.file(name));
}

}  // namespace

TEST_CASE("models trained by fastText answer as fastText does", "[fasttext]") {
  struct Case {
    const char* file;
    FastTextModelType type;
    FastTextLoss loss;
    bool quantized, output_quantized, pruned;
  };
  const Case c = GENERATE(values<Case>({
      {"sg.bin", FastTextModelType::skipgram, FastTextLoss::ns, false, false, false},
      {"cbow.bin", FastTextModelType::cbow, FastTextLoss::hs, false, false, false},
      {"sup_softmax.bin", FastTextModelType::supervised, FastTextLoss::softmax, false, false,
       false},
      {"sup_ova.bin", FastTextModelType::supervised, FastTextLoss::ova, false, false, false},
      {"sup_hs.bin", FastTextModelType::supervised, FastTextLoss::hs, false, false, false},
      {"sup_ns.bin", FastTextModelType::supervised, FastTextLoss::ns, false, false, false},
      {"sup_softmax.ftz", FastTextModelType::supervised, FastTextLoss::softmax, true, false, false},
      {"sup_ova.ftz", FastTextModelType::supervised, FastTextLoss::ova, true, false, false},
      {"sup_hs.ftz", FastTextModelType::supervised, FastTextLoss::hs, true, true, false},
      {"sup_ns.ftz", FastTextModelType::supervised, FastTextLoss::ns, true, false, true},
  }));
  INFO(c.file);
  const FastTextModel model = load_fasttext(fixture(c.file));
  CHECK(model.version() == 12);
  CHECK(model.args().model == c.type);
  CHECK(model.args().loss == c.loss);
  CHECK(model.quantized() == c.quantized);
  CHECK(model.output_quantized() == c.output_quantized);
  CHECK(model.subword_index().pruned() == c.pruned);
  CHECK(model.input_rows() == model.subword_index().vocab_size());
  const ember_test::AnswerCounts n =
      ember_test::check_fasttext_answers(model, fixture(std::string(c.file) + ".tsv"));
  CHECK(n.words > 50);
  CHECK(n.vectors >= 20);
  CHECK(n.subwords >= 20);
  CHECK(n.neighbours >= 10);
  CHECK(n.analogies == 4);
  CHECK(n.sentences == 17);
  if (model.supervised()) CHECK(n.predictions >= 40);
}

TEST_CASE("word vectors equal the plain reference bit for bit", "[fasttext]") {
  for (const char* file :
       {"sg.bin", "cbow.bin", "sup_softmax.bin", "sup_softmax.ftz", "sup_ova.ftz", "sup_ns.ftz"}) {
    INFO(file);
    const FastTextModel model = load_fasttext(fixture(file));
    std::vector<std::string> words = probe_words(300, 17);
    for (Index i = 0; i < model.nwords(); i += 7) words.emplace_back(model.word(i));
    const auto ref = reference_of(model);
    for (const auto& w : words) {
      INFO("word '" << w << "'");
      const std::vector<TokenId> ids = model.subword_index().ids(w);
      if (!model.subword_index().pruned()) CHECK(ids == ref.ids(w));
      RowVector<float> want;
      if (model.quantized()) {
        // A quantized model's vector: its decoded rows summed in order, times 1/n.
        want = RowVector<float>::Zero(model.dim());
        for (const TokenId r : ids) want += model.input_vector(r);
        if (!ids.empty()) want *= static_cast<float>(1.0 / static_cast<double>(ids.size()));
      } else {
        want = ember_test::reference_word_vector(model.input_matrix(), ids);
      }
      const RowVector<float> got = model.word_vector(w);
      CHECK(same_bits(got, want));
      RowVector<float> into(model.dim());
      model.word_vector(w, into);
      CHECK(same_bits(into, got));
    }
    const ember::RowMatrix<float> all = model.word_vectors();
    REQUIRE(all.rows() == model.nwords());
    for (Index i = 0; i < model.nwords(); i += 11) {
      CHECK(same_bits(all.row(i), model.word_vector(model.word(i))));
    }
  }
}

TEST_CASE("lines are tokenized as fastText reads them", "[fasttext]") {
  using V = std::vector<std::string_view>;
  CHECK(FastTextModel::tokenize("") == V{"</s>"});
  CHECK(FastTextModel::tokenize("  a\tb\v\fc\r") == V{"a", "b", "c", "</s>"});
  CHECK(FastTextModel::tokenize(std::string_view("x\0y", 3)) == V{"x", "y", "</s>"});
  CHECK(FastTextModel::tokenize("東京 🍕") == V{"東京", "🍕", "</s>"});
  const auto e =
      ember_test::catch_as<ember::ValueError>([] { (void)FastTextModel::tokenize("a\nb"); });
  REQUIRE(e);
  CHECK(e->value() == 1);
  CHECK_THAT(e->what(), Catch::Contains("'\\n' at position 1"));

  const FastTextModel model = load_fasttext(fixture("sup_softmax.bin"));
  const auto ref = reference_of(model);
  for (const char* line : {"the cat eats pizza", "__label__food pasta 東京", "", "zz yy xx ww"}) {
    INFO(line);
    std::vector<std::string> tokens;
    for (const auto t : FastTextModel::tokenize(line)) tokens.emplace_back(t);
    CHECK(model.line_ids(line) == ref.line(tokens));
  }
}

TEST_CASE("the door refuses bad queries before answering", "[fasttext]") {
  const FastTextModel sg = load_fasttext(fixture("sg.bin"));
  const FastTextModel sup = load_fasttext(fixture("sup_hs.ftz"));
  CHECK_THROWS_AS(sg.predict("a b"), ember::StateError);
  CHECK_THROWS_WITH(sg.predict("a b"), Catch::Contains("not supervised (it is sg)"));
  CHECK_THROWS_AS(sup.predict("a", 0), ember::ValueError);
  CHECK_THROWS_AS(sup.predict("a", -2), ember::ValueError);
  CHECK_THROWS_AS(sup.predict("a", 1, std::numeric_limits<float>::quiet_NaN()), ember::ValueError);
  CHECK_THROWS_AS(sup.predict("a\nb"), ember::ValueError);
  CHECK_THROWS_AS(sup.sentence_vector("a\nb"), ember::ValueError);
  CHECK_THROWS_AS(sg.sentence_vector("a\nb"), ember::ValueError);
  CHECK_THROWS_AS(sg.nearest("cat", -1), ember::ValueError);
  CHECK(sg.nearest("cat", 0).empty());
  CHECK(sg.nearest("cat", 100000).size() == static_cast<std::size_t>(sg.nwords() - 1));
  CHECK_THROWS_AS(sg.word(sg.nwords()), ember::IndexError);
  CHECK_THROWS_AS(sg.word(-1), ember::IndexError);
  CHECK_THROWS_AS(sg.word_count(sg.nwords()), ember::IndexError);
  CHECK_THROWS_AS(sup.label(sup.nlabels()), ember::IndexError);
  CHECK_THROWS_AS(sup.input_vector(sup.input_rows()), ember::IndexError);
  CHECK_THROWS_AS(sup.input_matrix(), ember::StateError);
  CHECK_THROWS_AS(sup.output_matrix(), ember::StateError);
  CHECK_NOTHROW(sg.input_matrix());
  RowVector<float> wrong(sg.dim() + 1);
  CHECK_THROWS_AS(sg.word_vector("cat", wrong), ember::ShapeError);
  CHECK(sg.word_id("cat").has_value());
  CHECK_FALSE(sg.word_id("__label__food").has_value());
  CHECK(sup.label_id("__label__food").has_value());
  CHECK_FALSE(sup.label_id("cat").has_value());
  CHECK(sup.predict("a", -1, 2.0f).empty());  // no probability reaches 2
  CHECK(sup.predict("a", 1000).size() <= static_cast<std::size_t>(sup.nlabels()));
  CHECK(sup.predict("a", std::numeric_limits<Index>::max()) == sup.predict("a", -1));
}

TEST_CASE("a model's vectors work with ember's query and bag code", "[fasttext][query][bag]") {
  const FastTextModel model = load_fasttext(fixture("cbow.bin"));
  // Neighbours over fastText's unit vectors: the same words as nearest(), scores within rounding.
  const ember::query::Neighbours<float> nn(model.normalized_word_vectors(), model.vocabulary());
  for (Index i = 0; i < model.nwords(); i += 13) {
    const auto ours = model.nearest(model.word(i), 5);
    const auto theirs = nn.nearest(i, 5);
    REQUIRE(ours.size() == theirs.size());
    for (std::size_t r = 0; r < ours.size(); ++r) {
      CHECK(std::abs(ours[r].score - theirs[r].score) < 1e-5f);
      if (r + 1 < ours.size() && ours[r].score - ours[r + 1].score > 1e-5f) {
        CHECK(ours[r].id == theirs[r].id);
      }
    }
  }
  // EmbeddingBag over the input matrix: sum pooling times 1/n is the word vector, bit for bit.
  const ember::EmbeddingView<float> view(model.input_matrix());
  const ember::EmbeddingBag<ember::EmbeddingView<float>> bag(view, ember::BagMode::sum);
  const std::vector<std::string> words = {"cat", "chats", "東京都", "🍕🍕"};
  const ember::SubwordBags b = model.subword_index().bags(words);
  const ember::RowMatrix<float> sums = bag.forward(b.ids, b.offsets);
  for (std::size_t w = 0; w < words.size(); ++w) {
    const auto n = model.subword_index().ids(words[w]).size();
    const RowVector<float> v =
        sums.row(static_cast<Index>(w)) * static_cast<float>(1.0 / static_cast<double>(n));
    CHECK(same_bits(v, model.word_vector(words[w])));
  }
}

TEST_CASE("a query norm of exactly 1e-8f counts as zero, as fastText's double comparison has it",
          "[fasttext]") {
  // fastText's getNN takes |q| as 1 when |q| < 1e-8 (a double): the float 1e-8f, just below it,
  // is such a norm. This model (words "a" = [1e-8f], "b" = [1]) written to a file and asked with
  // fastText's Python module, get_nearest_neighbors("a", 1), answers [(9.99999993922529e-09,
  // 'b')]: b's unit vector times q, not divided by |q| (which would give 1).
  ember_test::FastTextSpec spec;
  spec.model = 2;  // skipgram
  spec.loss = 2;
  spec.dim = 1;
  spec.bucket = 0;
  spec.minn = 0;
  spec.maxn = 0;
  spec.word_ngrams = 1;
  spec.words = {{"a", 1}, {"b", 1}};
  spec.input = ember_test::dense_matrix(2, 1, 0, 0);
  spec.input.values = {1e-8f, 1.0f};
  spec.output = ember_test::dense_matrix(2, 1, 0, 0);
  const ember_test::ScratchDir dir;
  const FastTextModel m = load_bytes(dir, ember_test::write_model(spec).bytes);
  const auto nn = m.nearest("a", 1);
  REQUIRE(nn.size() == 1);
  CHECK(m.word(nn[0].id) == "b");
  CHECK(nn[0].score == 1e-8f);
}

TEST_CASE("answers whose arithmetic overflows are a ValueError, never NaN", "[fasttext]") {
  // Finite values whose sums overflow to infinity: fastText answers NaN probabilities (softmax
  // of +inf scores: inf - inf) and NaN similarities (inf / inf); ember refuses.
  ember_test::FastTextSpec spec;
  spec.dim = 2;
  spec.bucket = 0;
  spec.minn = 0;
  spec.maxn = 0;
  spec.word_ngrams = 1;
  spec.words = {{"</s>", 2}, {"a", 1}, {"b", 1}};
  spec.labels = {{"__label__x", 1}, {"__label__y", 1}};
  spec.input = ember_test::dense_matrix(3, 2, 0, 0);
  spec.input.values = {3e38f, 3e38f, 3e38f, 3e38f, 1.0f, 1.0f};
  spec.output = ember_test::dense_matrix(2, 2, 0, 0);
  spec.output.values = {1.0f, 1.0f, 1.0f, 0.5f};
  const ember_test::ScratchDir dir;
  const FastTextModel m = load_bytes(dir, ember_test::write_model(spec).bytes);
  REQUIRE(m.args().loss == FastTextLoss::softmax);
  const auto e = ember_test::catch_as<ember::ValueError>([&] { (void)m.predict("a", -1); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("the score of output row 0 is inf"));
  // b's unit vector (1/√2, 1/√2) dotted with a's vector (3e38, 3e38) overflows, and so does |a|.
  const auto n = ember_test::catch_as<ember::ValueError>([&] { (void)m.nearest("a", 1); });
  REQUIRE(n);
  CHECK_THAT(n->what(), Catch::Contains("the similarity of word 2 is NaN"));
  // One-vs-all reads an infinite score through the sigmoid table (1), as fastText does.
  spec.loss = 4;
  const FastTextModel ova = load_bytes(dir, ember_test::write_model(spec).bytes, "ova.bin");
  // fastText's Python module on this file: predict("a", k=-1) is (('__label__y', '__label__x'),
  // [1.00001001, 1.00001001]), exp(log(1 + 1e-5)), the tie in its heap's order.
  const auto p = ova.predict("a", -1);
  REQUIRE(p.size() == 2);
  CHECK(p[0].label == "__label__y");
  CHECK(p[1].label == "__label__x");
  for (const auto& x : p) CHECK(x.probability == std::exp(ember::detail::std_log(1.0f)));
}

TEST_CASE("hand-built models load: dense, quantized with norms, pruned, version 11", "[fasttext]") {
  const ember_test::ScratchDir dir;
  const auto dense = ember_test::small_supervised();
  const FastTextModel m = load_bytes(dir, ember_test::write_model(dense).bytes);
  CHECK(m.nwords() == 3);
  CHECK(m.nlabels() == 2);
  CHECK(m.ntokens() == 10);
  CHECK(m.word(2) == "çé");
  CHECK(m.label(1) == "__label__y");
  CHECK(m.label_count(0) == 3);
  CHECK(m.input_rows() == 7);
  CHECK(m.input_matrix()(6, 2) == dense.input.values[20]);
  const auto p = m.predict("ab çé", -1);
  REQUIRE(p.size() == 2);
  // Each probability is fastText's exp(log(p + 1e-5)): the two add up to 1 + 2e-5.
  CHECK(std::abs(p[0].probability + p[1].probability - 1.00002f) < 1e-6f);

  const auto quant = ember_test::small_quantized();
  const FastTextModel q = load_bytes(dir, ember_test::write_model(quant).bytes, "q.ftz");
  CHECK(q.quantized());
  CHECK(q.output_quantized());
  CHECK(q.input_rows() == 5);
  CHECK(q.subword_index().pruned());
  // Row 4 decodes as its norm centroid (code 44) times the centroids of its codes (28, 31): the
  // first sub-quantizer's of 2 values, the last one's of 1 (fastText's layout).
  const float norm = quant.input.npq.centroids[44];
  const RowVector<float> row = q.input_vector(4);
  CHECK(row(0) == norm * quant.input.pq.centroids[28 * 2]);
  CHECK(row(1) == norm * quant.input.pq.centroids[28 * 2 + 1]);
  CHECK(row(2) == norm * quant.input.pq.centroids[256 * 2 + 31]);
  for (const TokenId r : q.subword_index().ids("zz")) CHECK(r < 5);
  CHECK(q.predict("ab", 1).size() == 1);

  auto v11 = dense;
  v11.version = 11;
  const FastTextModel old = load_bytes(dir, ember_test::write_model(v11).bytes, "v11.bin");
  CHECK(old.args().maxn == 0);  // fastText: old supervised models use no character n-grams
  CHECK(old.subword_index().ids("ab") == std::vector<TokenId>{1});
}

TEST_CASE("every truncation of a model is a FormatError at or before the cut",
          "[fasttext][reliability]") {
  // An in-memory file (the fuzz harnesses' memfd): thousands of rewrites, no disk traffic.
  ember_fuzz::InputFile& file = ember_fuzz::InputFile::instance();
  for (const auto& spec : {ember_test::small_supervised(), ember_test::small_quantized()}) {
    const ember_test::WrittenModel w = ember_test::write_model(spec);
    // Every length, except inside the long arrays (values, codes, centroids), where a cut one
    // byte in, in the middle and one byte short stands for the rest (they fail the same check).
    auto representative = [&](std::size_t len) {
      for (const auto& f : w.fields) {
        if (f.size > 16 && len > f.offset + 1 && len < f.offset + f.size - 1) {
          return len == f.offset + f.size / 2;
        }
      }
      return true;
    };
    for (std::size_t len = 0; len < w.bytes.size(); ++len) {
      if (!representative(len)) continue;
      INFO("truncated to " << len << " of " << w.bytes.size() << " bytes");
      const std::string& path = file.write(w.bytes.data(), len);
      const auto e = ember_test::catch_as<ember::FormatError>([&] { (void)load_fasttext(path); });
      REQUIRE(e);
      CHECK(e->path() == path);
      CHECK(e->offset() <= len);
    }
    for (const auto& f : w.fields) {
      INFO("cut at the start of " << f.name << " (byte " << f.offset << ")");
      const std::string& path = file.write(w.bytes.data(), f.offset);
      const auto e = ember_test::catch_as<ember::FormatError>([&] { (void)load_fasttext(path); });
      REQUIRE(e);
      if (f.offset == 0) {
        CHECK_THAT(e->what(), Catch::Contains("empty file"));
      } else if (f.name.rfind("entry", 0) == 0 || f.name.rfind("prune", 0) == 0) {
        CHECK(e->offset() <= f.offset);  // the dictionary's size claim may fail first
      } else {
        CHECK(e->offset() == f.offset);
        CHECK_THAT(e->what(), Catch::Contains("the file ends inside"));
      }
    }
  }
}

TEST_CASE("a corrupted field is a FormatError naming the byte and what was expected",
          "[fasttext][reliability]") {
  using ember_test::Bytes;
  const ember_test::ScratchDir dir;
  auto load = [](const std::string& path) { (void)load_fasttext(path); };
  // Overwrites field `name` of the written model with the bytes of `value`.
  auto patched = [](const ember_test::WrittenModel& w, const std::string& name,
                    const Bytes& value) {
    Bytes b = w.bytes;
    const ember_test::Field& f = w.field(name);
    REQUIRE(value.size() <= f.size);
    std::copy(value.begin(), value.end(), b.begin() + static_cast<std::ptrdiff_t>(f.offset));
    return b;
  };
  auto i32 = [](std::int32_t v) { return ember_test::le_bytes(v); };
  auto i64 = [](std::int64_t v) { return ember_test::le_bytes(v); };
  auto u8 = [](int v) { return Bytes{static_cast<unsigned char>(v)}; };

  const ember_test::WrittenModel d = ember_test::write_model(ember_test::small_supervised());
  struct Corruption {
    const char* field;
    Bytes value;
    const char* fragment;
    const char* reported;  // the field the error must point at (empty: the same)
  };
  const std::vector<Corruption> dense_cases = {
      {"magic", i32(12345), "not a fastText model: magic number 12345", ""},
      {"version", i32(13), "format version 13 is not supported", ""},
      {"version", i32(10), "format version 10", ""},
      {"args.dim", i32(0), "args.dim is 0, expected >= 1", ""},
      {"args.wordNgrams", i32(-1), "args.wordNgrams is -1", ""},
      {"args.loss", i32(5), "args.loss is 5", ""},
      {"args.model", i32(0), "args.model is 0", ""},
      {"args.bucket", i32(-1), "args.bucket is -1", ""},
      {"args.bucket", i32(0), "args.bucket is 0, but minn 2, maxn 3", ""},
      {"args.minn", i32(-1), "args.minn is -1", ""},
      {"args.maxn", i32(-3), "args.maxn is -3", ""},
      {"dict.size", i32(-1), "the dictionary size is -1", ""},
      {"dict.size", i32(6), "the label count is 2, expected size - words = 3", "dict.nlabels"},
      {"dict.nwords", i32(-1), "the word count is -1", ""},
      {"dict.nlabels", i32(-1), "the label count is -1", ""},
      {"dict.ntokens", i64(-7), "the token count is -7", ""},
      {"dict.prune_size", i64(-2), "the prune index size is -2", ""},
      {"dict.prune_size", i64(0), "a pruned dictionary", "input.quant"},
      {"entry1.word", u8(0), "dictionary entry 1 has an empty word", ""},
      {"entry2.word", ember_test::bytes_of("</s>"), "dictionary entry 2 repeats", ""},
      {"entry1.count", i64(-1), "dictionary entry 1 ('ab') has count -1", ""},
      {"entry0.type", u8(1), "has type 1, expected 0 (a word", ""},
      {"entry4.type", u8(0), "has type 0, expected 1 (a label", ""},
      {"entry3.type", u8(2), "has type 2", ""},
      {"input.quant", u8(2), "quantization flag is 2, expected 0 or 1", ""},
      {"input.rows", i64(8), "the input matrix has 8 rows, expected words + buckets = 7", ""},
      {"input.cols", i64(4), "the input matrix has 4 columns, expected args.dim = 3", ""},
      {"output.quant", u8(9), "is 9, expected 0 or 1", ""},
      {"output.rows", i64(3), "the output matrix has 3 rows, expected 2 (the labels)", ""},
      {"output.cols", i64(2), "the output matrix has 2 columns", ""},
  };
  // Each case: the field overwritten, a FormatError naming the expectation at the field's byte
  // (or at the field given as `reported`).
  auto check_cases = [&](const ember_test::WrittenModel& w, const std::vector<Corruption>& cases) {
    for (const auto& c : cases) {
      INFO(c.field << " -> " << c.fragment);
      const std::string at = *c.reported ? c.reported : c.field;
      ember_test::check_rejected(dir, "corrupt.bin", patched(w, c.field, c.value),
                                 {c.fragment, w.field(at).offset}, load);
    }
  };
  check_cases(d, dense_cases);
  {
    // A huge dictionary claim is refused before anything is allocated for it.
    Bytes b = patched(d, "dict.size", i32(1000000));
    const Bytes nwords = i32(999998);
    std::copy(nwords.begin(), nwords.end(),
              b.begin() + static_cast<std::ptrdiff_t>(d.field("dict.nwords").offset));
    ember_test::check_rejected(
        dir, "claim.bin", b, {"the dictionary claims 1000000 entries", d.field("dict.size").offset},
        load);
  }
  {
    Bytes b = d.bytes;
    b.push_back(0);
    ember_test::check_rejected(dir, "trailing.bin", b,
                               {"1 bytes after the output matrix", d.bytes.size()}, load);
  }
  {
    const std::size_t value = d.field("input.values").offset + 4 * 7;  // row 2, column 1
    Bytes b = d.bytes;
    const Bytes nan = ember_test::le_bytes(std::numeric_limits<float>::quiet_NaN());
    std::copy(nan.begin(), nan.end(), b.begin() + static_cast<std::ptrdiff_t>(value));
    ember_test::check_rejected(
        dir, "nan.bin", b, {"non-finite value nan at row 2, column 1 of the input matrix", value},
        load);
    ember_test::write_bytes(dir.file("nan_ok.bin"), b);
    const FastTextModel m = load_fasttext(dir.file("nan_ok.bin"), {.allow_non_finite = true});
    CHECK(std::isnan(m.input_matrix()(2, 1)));
  }
  {
    auto spec = ember_test::small_supervised();
    spec.loss = 1;  // hs: label counts at 1e15 break fastText's Huffman tree
    spec.labels[0].second = 999999999999999;
    ember_test::check_rejected(dir, "counts.bin", ember_test::write_model(spec).bytes,
                               {"label counts add up to 10^15"}, load);
  }
  {
    // No row in either matrix leaves dim unbounded by the file: refused at the dictionary.
    ember_test::FastTextSpec spec;
    spec.dim = std::numeric_limits<std::int32_t>::max();
    spec.bucket = 0;
    spec.maxn = 0;
    spec.word_ngrams = 1;
    spec.input.cols = spec.output.cols = spec.dim;
    const auto empty = ember_test::write_model(spec);
    ember_test::check_rejected(
        dir, "no_rows.bin", empty.bytes,
        {"no row in either matrix (0 words, 0 labels, 0 buckets), so args.dim 2147483647",
         empty.field("dict.size").offset},
        load);
    // An unsupervised model of labels only: its output matrix has a row per word, none.
    spec.model = 2;
    spec.labels = {{"__label__x", 1}};
    const auto labels_only = ember_test::write_model(spec);
    ember_test::check_rejected(
        dir, "labels_only.bin", labels_only.bytes,
        {"(0 words, 1 labels, 0 buckets)", labels_only.field("dict.size").offset}, load);
    // The same supervised: the label's output row bounds dim, so it loads (dim 2 here).
    spec.model = 3;
    spec.dim = 2;
    spec.input.cols = 2;
    spec.output = ember_test::dense_matrix(1, 2, 0.5f, 0.1f);
    const FastTextModel m = load_bytes(dir, ember_test::write_model(spec).bytes, "one_label.bin");
    CHECK(m.input_rows() == 0);
    CHECK(m.output_rows() == 1);
  }

  const ember_test::WrittenModel q = ember_test::write_model(ember_test::small_quantized());
  const std::vector<Corruption> quant_cases = {
      {"prune0.bucket", i32(4), "prune index pair 0 has bucket 4, expected [0, 4)", ""},
      {"prune1.row", i32(2), "prune index pair 1 has row 2", ""},
      {"prune1.row", i32(0), "prune index pair 1 has row 0", ""},
      {"prune1.bucket", i32(3), "prune index pair 1 repeats bucket 3", ""},
      {"input.qnorm", u8(3), "qnorm flag is 3", ""},
      {"input.rows", i64(7), "the input matrix has 7 rows, expected words + kept buckets = 5", ""},
      {"input.cols", i64(2), "the input matrix has 2 columns", ""},
      {"input.codesize", i32(-1), "code size is -1", ""},
      {"input.pq.dim", i32(4), "quantizer's dimension is 4, expected 3", ""},
      {"input.pq.nsubq", i32(3), "has 3 sub-quantizers, expected 2", ""},
      {"input.pq.dsub", i32(0), "sub-vector size is 0, expected at least 1", ""},
      {"input.pq.lastdsub", i32(2), "last sub-vector size is 2, expected 1", ""},
      {"input.npq.dim", i32(2), "norm quantizer's dimension is 2, expected 1", ""},
      {"output.quant", u8(5), "is 5, expected 0 or 1", ""},
      {"output.rows", i64(1), "the output matrix has 1 rows, expected 2 (the labels)", ""},
      {"output.pq.nsubq", i32(1), "has 1 sub-quantizers, expected 2", ""},
  };
  check_cases(q, quant_cases);
  {
    auto spec = ember_test::small_quantized();
    spec.input.codes.push_back(0);  // one code too many
    const auto w = ember_test::write_model(spec);
    ember_test::check_rejected(dir, "codes.ftz", w.bytes,
                               {"code size is 11, expected 10 (5 rows x 2 sub-quantizers)",
                                w.field("input.codesize").offset},
                               load);
  }
  {
    const std::size_t value = q.field("input.pq.centroids").offset + 4 * 9;
    Bytes b = q.bytes;
    const Bytes inf = ember_test::le_bytes(std::numeric_limits<float>::infinity());
    std::copy(inf.begin(), inf.end(), b.begin() + static_cast<std::ptrdiff_t>(value));
    ember_test::check_rejected(dir, "inf.ftz", b, {"non-finite value inf at value 9", value}, load);
  }
  // Not a model at all, and files that are no file.
  ember_test::check_rejected(dir, "empty.bin", {}, {"empty file", 0}, load);
  ember_test::check_rejected(
      dir, "npy.bin", ember_test::read_bytes(std::string(EMBER_TEST_DATA_DIR) + "/npy_f4_le.npy"),
      {"not a fastText model", 0}, load);
  CHECK_THROWS_AS(load_fasttext(dir.file("missing.bin")), ember::FormatError);
  CHECK_THROWS_AS(load_fasttext(std::string(EMBER_TEST_DATA_DIR)), ember::FormatError);
}

TEST_CASE("a model trained now by the installed fastText answers as it does",
          "[.][fasttext_live]") {
  // Run by the ctest fasttext.live after make_fixtures.py `live` has trained the models.
  const char* dir = std::getenv("EMBER_FASTTEXT_LIVE_DIR");
  REQUIRE(dir != nullptr);
  std::size_t models = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (p.size() < 4 || p.substr(p.size() - 4) != ".tsv") continue;
    const std::string model_path = p.substr(0, p.size() - 4);
    INFO(model_path);
    const FastTextModel model = load_fasttext(model_path);
    const auto n = ember_test::check_fasttext_answers(model, p);
    CHECK(n.vectors >= static_cast<std::size_t>(model.nwords()));
    ++models;
  }
  CHECK(models == 10);
}

TEST_CASE("a missing model is a FileError naming load_fasttext, the path and the reason",
          "[fasttext][io]") {
  ember_test::check_missing_file("io::load_fasttext",
                                 [](const std::string& p) { static_cast<void>(load_fasttext(p)); });
  const ember_test::ScratchDir dir;
  const std::string sub = dir.file("a_directory");
  std::filesystem::create_directory(sub);
  const auto e = ember_test::catch_as<ember::FileError>([&] { (void)load_fasttext(sub); });
  REQUIRE(e);
  CHECK(std::string(e->what()) ==
        "io::load_fasttext: cannot open \"" + sub + "\": not a regular file (it is a directory)");
  CHECK(e->code() == std::errc::is_a_directory);
}

#if defined(__linux__)
TEST_CASE("load_fasttext opens the file once: the map and the matrices come from one descriptor",
          "[fasttext][io]") {
  // The dictionary is parsed from a map and the matrices are read with pread: when the two came
  // from two opens of the path, a file replaced in between gave a model made of two files. The
  // kernel reports each open of a watched file (IN_OPEN), so the count shows how many there were.
  // The kernel merges an event into an identical one just before it, so the directory is watched
  // too: each open is then reported to both watches in turn, and no two in a row are identical.
  const ember_test::ScratchDir dir;
  const std::string path = dir.file("model.bin");
  ember_test::write_bytes(path, ember_test::write_model(ember_test::small_supervised()).bytes);
  const int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(watch >= 0);
  const int on_file = ::inotify_add_watch(watch, path.c_str(), IN_OPEN);
  REQUIRE(on_file >= 0);
  REQUIRE(::inotify_add_watch(watch, dir.file("").c_str(), IN_OPEN) >= 0);
  const FastTextModel m = load_fasttext(path);
  CHECK(m.nwords() == 3);
  int opens = 0;
  alignas(inotify_event) char buf[4096];
  for (::ssize_t n; (n = ::read(watch, buf, sizeof buf)) > 0;) {
    for (char* p = buf; p < buf + n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(p);
      if (ev->wd == on_file && (ev->mask & IN_OPEN) != 0) ++opens;
      p += sizeof(inotify_event) + ev->len;
    }
  }
  ::close(watch);
  CHECK(opens == 1);
}
#endif

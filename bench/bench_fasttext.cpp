// fastText models, ember against fastText's own library (libfasttext, when configure finds it) on
// the same model in the same run, one thread: load time and peak memory of the loaders, vectors
// of unknown (and seen) words per second, nearest-neighbour queries per second.
//
// The model is $EMBER_FASTTEXT_BENCH_MODEL (a realistic one: `fasttext skipgram -dim 100
// -bucket 2000000 ...`, written by bench/fasttext_bench_model.py; docs/fasttext.md), else the small
// fixture tests/data/fasttext/cbow.bin.
// Peak memory is measured in a child process per loader (bench/fasttext_peak_memory.cpp), whose
// maximum resident set (getrusage) is reported against the file size, with the baseline of the
// same program loading nothing.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ember/io/fasttext.hpp>

#if defined(EMBER_BENCH_HAVE_FASTTEXT)
#include <fasttext/fasttext.h>
#endif

namespace {

std::string model_path() {
  const char* env = std::getenv("EMBER_FASTTEXT_BENCH_MODEL");
  return env != nullptr && *env != '\0' ? std::string(env)
                                        : std::string(EMBER_BENCH_FASTTEXT_FIXTURE);
}

double file_mb() {
  return static_cast<double>(std::filesystem::file_size(model_path())) / (1024.0 * 1024.0);
}

const ember::io::FastTextModel& model() {
  static const ember::io::FastTextModel m = ember::io::load_fasttext(model_path());
  return m;
}

/// Words the model has not seen: dictionary words with a suffix, kept when still unknown.
const std::vector<std::string>& unknown_words() {
  static const std::vector<std::string> words = [] {
    const auto& m = model();
    const char* suffixes[] = {"s", "ing", "é", "ß", "x", "東", "ed", "ée"};
    std::vector<std::string> out;
    for (ember::Index i = 0; out.size() < 20000 && i < 40 * m.nwords(); ++i) {
      std::string w = std::string(m.word((i * 7919) % m.nwords())) + suffixes[i % 8];
      if (!m.word_id(w)) out.push_back(std::move(w));
    }
    return out;
  }();
  return words;
}

const std::vector<std::string>& seen_words() {
  static const std::vector<std::string> words = [] {
    const auto& m = model();
    std::vector<std::string> out;
    for (ember::Index i = 0; i < std::min<ember::Index>(20000, m.nwords()); ++i) {
      out.emplace_back(m.word((i * 7919) % m.nwords()));
    }
    return out;
  }();
  return words;
}

/// Query words of the nearest benchmarks: half seen, half unseen.
std::vector<std::string> queries() {
  std::vector<std::string> q;
  for (std::size_t i = 0; i < 10; ++i) {
    q.push_back(seen_words()[i * 37 % seen_words().size()]);
    q.push_back(unknown_words()[i * 41 % unknown_words().size()]);
  }
  return q;
}

void BM_Load_Ember(benchmark::State& state) {
  for (auto _ : state) {
    auto m = ember::io::load_fasttext(model_path());
    benchmark::DoNotOptimize(m.nwords());
  }
  state.counters["file_MB"] = file_mb();
}
BENCHMARK(BM_Load_Ember)
    ->Name("load/ember")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

void BM_WordVector_Ember(benchmark::State& state, const std::vector<std::string>& (*list)()) {
  const auto& m = model();
  const auto& words = list();
  ember::RowVector<float> v(m.dim());
  std::size_t i = 0;
  for (auto _ : state) {
    m.word_vector(words[i], v);
    benchmark::DoNotOptimize(v.data());
    i = i + 1 == words.size() ? 0 : i + 1;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_WordVector_Ember, unknown, unknown_words)->Name("word_vector/unknown/ember");
BENCHMARK_CAPTURE(BM_WordVector_Ember, seen, seen_words)->Name("word_vector/seen/ember");

void BM_Nearest_Ember(benchmark::State& state) {
  const auto& m = model();
  const auto q = queries();
  (void)m.nearest(q[0], 10);  // the unit word vectors, built on first use (as fastText does)
  std::size_t i = 0;
  for (auto _ : state) {
    auto r = m.nearest(q[i], 10);
    benchmark::DoNotOptimize(r.data());
    i = (i + 1) % q.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Nearest_Ember)->Name("nearest/ember")->Unit(benchmark::kMillisecond);

#if defined(EMBER_BENCH_HAVE_FASTTEXT)
fasttext::FastText& fasttext_model() {
  static fasttext::FastText* ft = [] {
    auto* f = new fasttext::FastText();
    f->loadModel(model_path());
    return f;
  }();
  return *ft;
}

void BM_Load_FastText(benchmark::State& state) {
  for (auto _ : state) {
    fasttext::FastText ft;
    ft.loadModel(model_path());
    benchmark::DoNotOptimize(ft.getDimension());
  }
  state.counters["file_MB"] = file_mb();
}
BENCHMARK(BM_Load_FastText)
    ->Name("load/fasttext")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

void BM_WordVector_FastText(benchmark::State& state, const std::vector<std::string>& (*list)()) {
  const auto& ft = fasttext_model();
  const auto& words = list();
  fasttext::Vector v(ft.getDimension());
  std::size_t i = 0;
  for (auto _ : state) {
    ft.getWordVector(v, words[i]);
    benchmark::DoNotOptimize(v.data());
    i = i + 1 == words.size() ? 0 : i + 1;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_WordVector_FastText, unknown, unknown_words)
    ->Name("word_vector/unknown/fasttext");
BENCHMARK_CAPTURE(BM_WordVector_FastText, seen, seen_words)->Name("word_vector/seen/fasttext");

void BM_Nearest_FastText(benchmark::State& state) {
  auto& ft = fasttext_model();
  const auto q = queries();
  (void)ft.getNN(q[0], 10);
  std::size_t i = 0;
  for (auto _ : state) {
    auto r = ft.getNN(q[i], 10);
    benchmark::DoNotOptimize(r.data());
    i = (i + 1) % q.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Nearest_FastText)->Name("nearest/fasttext")->Unit(benchmark::kMillisecond);
#endif

// ---- peak memory, one child process per loader ------------------------------------------------

/// Runs fasttext_peak_memory `loader` on the model and returns its peak resident set in MiB.
double child_peak_mb(const std::string& loader) {
  const std::string cmd =
      "'" + std::string(EMBER_BENCH_FASTTEXT_PEAK) + "' " + loader + " '" + model_path() + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  long kb = -1;
  if (std::fscanf(p, "%ld", &kb) != 1) kb = -1;
  ::pclose(p);
  return static_cast<double>(kb) / 1024.0;
}

void BM_PeakMemory(benchmark::State& state, const char* loader) {
  double peak = 0, base = 0;
  for (auto _ : state) {
    base = child_peak_mb("none");
    peak = child_peak_mb(loader);
  }
  state.counters["peak_MB"] = peak;
  state.counters["process_MB"] = base;
  state.counters["file_MB"] = file_mb();
  state.counters["peak_over_file"] = peak / file_mb();
  state.counters["added_over_file"] = (peak - base) / file_mb();
}
BENCHMARK_CAPTURE(BM_PeakMemory, ember, "ember")
    ->Name("peak_memory/ember")
    ->Iterations(1)
    ->Unit(benchmark::kSecond);
#if defined(EMBER_BENCH_HAVE_FASTTEXT)
BENCHMARK_CAPTURE(BM_PeakMemory, fasttext, "fasttext")
    ->Name("peak_memory/fasttext")
    ->Iterations(1)
    ->Unit(benchmark::kSecond);
#endif

}  // namespace

BENCHMARK_MAIN();

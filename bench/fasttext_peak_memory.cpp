// The child process of bench_fasttext's peak-memory cases: loads a fastText model with one loader
// and prints the process's peak resident set (getrusage, KiB). A program of its own, linked with
// nothing but ember (and libfasttext), so the baseline of the process is small and the same for
// both loaders; `none` loads nothing and prints that baseline.
//
//   fasttext_peak_memory ember|fasttext|none MODEL
#include <cstdio>
#include <string>

#include <sys/resource.h>

#include <ember/io/fasttext.hpp>

#if defined(EMBER_BENCH_HAVE_FASTTEXT)
#include <fasttext/fasttext.h>
#endif

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fasttext_peak_memory ember|fasttext|none MODEL\n");
    return 2;
  }
  const std::string loader = argv[1];
  long words = 0;
  if (loader == "ember") {
    const auto m = ember::io::load_fasttext(argv[2]);
    words = static_cast<long>(m.nwords());
#if defined(EMBER_BENCH_HAVE_FASTTEXT)
  } else if (loader == "fasttext") {
    fasttext::FastText ft;
    ft.loadModel(argv[2]);
    words = ft.getDictionary()->nwords();
#endif
  } else if (loader != "none") {
    return 2;
  }
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  std::printf("%ld %ld\n", u.ru_maxrss, words);
  return 0;
}

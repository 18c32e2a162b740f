#!/usr/bin/python3
"""Writes the model bench_fasttext's documented figures were measured on (docs/fasttext.md, "Speed
and memory"): a generated corpus of 400,000 lines, about 6M tokens (Zipf(1.05) draws from 300,000
word types of 1-5 syllables, some accented, CJK or emoji; Python's random, seed 5), and the
skipgram model the installed `fasttext` trains on it.

  /usr/bin/python3 bench/fasttext_bench_model.py DIR      # DIR/big.txt, then DIR/big.bin (967 MiB)
  EMBER_FASTTEXT_BENCH_MODEL=DIR/big.bin build/release/bench/bench_fasttext ...

The corpus is the same bytes on every run; the trained values differ from run to run (two
training threads), the dictionary, the shapes and the file size do not. Training takes a few
minutes on two cores and needs about 2 GB of memory.
"""
import bisect
import itertools
import os
import random
import subprocess
import sys

SYLLABLES = ["ka", "no", "lu", "mé", "ri", "bo", "zu", "ña", "ké", "sa", "to", "mi", "rà", "ber",
             "lin", "ta", "go", "chen", "ü", "ß", "é", "è", "ça", "東", "京", "猫", "犬", "ラ", "メ",
             "ン", "🍕", "ø", "ak", "el", "or", "is", "an", "de", "tre", "vol"]

TRAIN = ["skipgram", "-dim", "100", "-bucket", "2000000", "-minn", "3", "-maxn", "6",
         "-minCount", "1", "-epoch", "1", "-thread", "2", "-verbose", "0"]


def write_corpus(path, types=300000, lines=400000, seed=5):
    rng = random.Random(seed)
    words = set()
    while len(words) < types:
        n = rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 5])
        words.add("".join(rng.choice(SYLLABLES) for _ in range(n)))
    words = sorted(words)
    rng.shuffle(words)
    cum = list(itertools.accumulate(1.0 / (i + 1) ** 1.05 for i in range(len(words))))
    total = cum[-1]
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            k = rng.randint(5, 25)
            f.write(" ".join(words[bisect.bisect_left(cum, rng.random() * total)]
                             for _ in range(k)) + "\n")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "big.txt")
    write_corpus(corpus)
    subprocess.run(["fasttext"] + TRAIN + ["-input", corpus, "-output", os.path.join(out, "big")],
                   check=True)
    os.remove(os.path.join(out, "big.vec"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

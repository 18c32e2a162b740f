#!/usr/bin/python3
"""Generates ember's golden word-vector fixtures with gensim (Debian's python3-gensim).

Run from anywhere with Debian's interpreter:  /usr/bin/python3 tests/data/make_gensim_fixtures.py
It trains a tiny Word2Vec model on a small built-in corpus (fixed seed, one worker), saves it as
word2vec binary and text and as GloVe text, reloads the binary file with KeyedVectors, and records
gensim's most_similar / most_similar_cosmul answers in gensim_answers.tsv:

  kind  positive(,-separated)  negative(,-separated)  topn  restrict_vocab  rank  word  score

The C++ tests (tests/test_query_similarity.cpp, tests/test_io_word2vec.cpp) compare against these:
same words, same order, scores within 1e-5. It also writes .npy fixtures with numpy.
"""
import os
import random

import numpy as np
from gensim.models import KeyedVectors, Word2Vec

HERE = os.path.dirname(os.path.abspath(__file__))


def corpus():
    rng = random.Random(7)
    royals = [("king", "queen"), ("prince", "princess"), ("man", "woman"), ("boy", "girl"),
              ("father", "mother"), ("son", "daughter"), ("brother", "sister"), ("uncle", "aunt")]
    places = [("paris", "france"), ("berlin", "germany"), ("rome", "italy"), ("madrid", "spain"),
              ("lisbon", "portugal"), ("vienna", "austria"), ("athens", "greece"), ("oslo", "norway")]
    verbs = ["walks", "talks", "eats", "sleeps", "runs", "reads", "writes", "sings", "sees", "likes"]
    adjs = ["old", "young", "wise", "tall", "happy", "sad", "rich", "poor", "brave", "kind"]
    foods = ["bread", "cheese", "wine", "café", "soup", "apple", "pear", "fish", "rice", "naïve"]
    sents = []
    for _ in range(1500):
        m, f = rng.choice(royals)
        a = rng.choice(adjs)
        v = rng.choice(verbs)
        food = rng.choice(foods)
        c, country = rng.choice(places)
        sents.append(["the", a, m, v, "and", "he", "is", "a", "male", m])
        sents.append(["the", a, f, v, "and", "she", "is", "a", "female", f])
        sents.append([c, "is", "the", "capital", "of", country, "and", c, "is", "a", "city"])
        sents.append(["in", country, "the", m, "eats", food, "in", c])
        sents.append(["the", f, "likes", food, "and", "the", m, "likes", food])
    return sents


def main():
    model = Word2Vec(corpus(), vector_size=16, window=3, min_count=1, workers=1, seed=42,
                     epochs=5, sg=1, negative=5)
    kv = model.wv
    kv.save_word2vec_format(os.path.join(HERE, "tiny_w2v.bin"), binary=True)
    kv.save_word2vec_format(os.path.join(HERE, "tiny_w2v.txt"), binary=False)
    with open(os.path.join(HERE, "tiny_w2v.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()[1:]
    with open(os.path.join(HERE, "tiny_glove.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")

    kv = KeyedVectors.load_word2vec_format(os.path.join(HERE, "tiny_w2v.bin"), binary=True)
    rows = []

    def record(kind, pos, neg, topn, restrict, result):
        for rank, (w, s) in enumerate(result):
            rows.append(f"{kind}\t{','.join(pos)}\t{','.join(neg)}\t{topn}\t{restrict}\t{rank}\t{w}\t{s:.9g}")

    for w in ["king", "queen", "paris", "bread", "walks", "café", "the"]:
        record("most_similar", [w], [], 10, 0, kv.most_similar(w, topn=10))
    record("most_similar", ["king"], [], 5, 20, kv.most_similar("king", topn=5, restrict_vocab=20))
    analogies = [("man", "king", "woman"), ("france", "paris", "germany"), ("boy", "girl", "prince"),
                 ("paris", "france", "rome")]
    for a, b, c in analogies:
        record("most_similar", [b, c], [a], 10, 0, kv.most_similar(positive=[b, c], negative=[a], topn=10))
        record("most_similar_cosmul", [b, c], [a], 10, 0,
               kv.most_similar_cosmul(positive=[b, c], negative=[a], topn=10))
    record("most_similar", ["king", "queen", "prince"], ["man", "paris"], 7, 0,
           kv.most_similar(positive=["king", "queen", "prince"], negative=["man", "paris"], topn=7))
    record("most_similar_cosmul", ["king"], [], 5, 0, kv.most_similar_cosmul(positive=["king"], topn=5))
    for a, b in [("king", "queen"), ("paris", "berlin"), ("bread", "walks")]:
        rows.append(f"similarity\t{a}\t{b}\t0\t0\t0\t-\t{kv.similarity(a, b):.9g}")
    with open(os.path.join(HERE, "gensim_answers.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    print("vocab", len(kv.index_to_key), "dim", kv.vector_size, "answers", len(rows))

    # .npy fixtures (numpy's own writer): versions 1.0 / 2.0 / 3.0, both byte orders, both layouts.
    a = np.arange(6, dtype=np.float64).reshape(2, 3) / 4 - 0.5
    np.save(os.path.join(HERE, "npy_f4_le.npy"), a.astype("<f4"))
    np.save(os.path.join(HERE, "npy_f8_be.npy"), a.astype(">f8"))
    np.save(os.path.join(HERE, "npy_f2_le.npy"), a.astype("<f2"))
    np.save(os.path.join(HERE, "npy_f4_fortran.npy"), np.asfortranarray(a.astype("<f4")))
    for version in [(2, 0), (3, 0)]:
        with open(os.path.join(HERE, f"npy_f4_v{version[0]}.npy"), "wb") as f:
            np.lib.format.write_array(f, a.astype("<f4"), version=version)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Trains ember's fastText fixtures with fastText itself and records fastText's answers for them.

Run with Debian's interpreter and packages (fasttext, python3-fasttext):

  /usr/bin/python3 tests/data/fasttext/make_fixtures.py            # regenerate the committed data
  /usr/bin/python3 tests/data/fasttext/make_fixtures.py live DIR   # the live comparison (ctest)

The committed data (this directory):

  <model>.bin     models trained by `fasttext` with the commands in MODELS (one thread, fixed seed)
                  on corpus.txt / corpus_tags.txt: written by corpus() (Python's random, seed 23;
                  accents, CJK, emoji, labels), then deleted: regenerated, not committed
  <model>.ftz     the same models quantized by `fasttext quantize` (QUANTIZED)
  <model>.tsv     what fastText's Python module (the same C++ library) answers for them: the
                  dictionary, word vectors, subwords, neighbours, analogies, sentence vectors and
                  predictions, one record a line (the format is in write_answers())

and the libFuzzer seeds tests/fuzz/corpus/fasttext/ (tiny models of dimension 1 or 2, under 4 KB).

`live DIR` trains the same models afresh into DIR, on a corpus of another seed, and answers for
every word of each dictionary, so tests/test_io_fasttext.cpp can compare ember against the
installed fastText ("[fasttext_live]", run by the ctest fasttext.live through live.sh). It exits
77 (skipped) when fastText is not installed.
"""
import os
import random
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZ_SEEDS = os.path.join(HERE, "..", "..", "fuzz", "corpus", "fasttext")

COMMON = ["-thread", "1", "-seed", "1", "-minCount", "1", "-verbose", "0"]

# name -> (corpus, fastText command line); input and output are added. Kept small: dimension
# 8-12, a few hundred buckets, so the repository and CI stay light.
MODELS = [
    ("sg", "corpus.txt", ["skipgram", "-dim", "8", "-minn", "2", "-maxn", "5", "-bucket", "300",
                          "-epoch", "50", "-lr", "0.1"]),
    ("cbow", "corpus.txt", ["cbow", "-dim", "12", "-minn", "3", "-maxn", "6", "-bucket", "300",
                            "-epoch", "50", "-lr", "0.2", "-loss", "hs"]),
    ("sup_softmax", "corpus.txt", ["supervised", "-dim", "10", "-minn", "2", "-maxn", "4",
                                   "-wordNgrams", "2", "-bucket", "300", "-epoch", "20",
                                   "-loss", "softmax", "-lr", "0.5"]),
    # maxn 0 and wordNgrams 1: fastText stores bucket 0 (no hashed rows at all).
    ("sup_ova", "corpus.txt", ["supervised", "-dim", "10", "-epoch", "20", "-loss", "ova",
                               "-lr", "0.5"]),
    # 266 labels (the tags): quantizing a classifier needs at least 256 rows.
    ("sup_hs", "corpus_tags.txt", ["supervised", "-dim", "10", "-wordNgrams", "2",
                                   "-bucket", "300", "-epoch", "20", "-loss", "hs", "-lr", "0.5"]),
    ("sup_ns", "corpus.txt", ["supervised", "-dim", "10", "-minn", "3", "-maxn", "3",
                              "-wordNgrams", "3", "-bucket", "300", "-epoch", "20", "-loss", "ns",
                              "-neg", "5", "-lr", "0.5"]),
]

# model -> `fasttext quantize` options (the .ftz is written next to the .bin).
QUANTIZED = [
    ("sup_softmax", []),                                        # dsub 2, dim 10: 5 sub-vectors
    ("sup_ova", ["-qnorm", "-dsub", "4"]),                      # 3 sub-vectors, the last of 2
    ("sup_hs", ["-qout"]),                                      # the classifier quantized too
    ("sup_ns", ["-cutoff", "300", "-retrain", "-epoch", "2", "-qnorm"]),  # pruned
]

PRUNED = {name for name, opts in QUANTIZED if "-cutoff" in opts}

# Tiny models for the fuzzer's seeds: (file, training command, quantize options or None).
FUZZ_MODELS = [
    ("tiny_sg.bin", ["skipgram", "-dim", "2", "-minn", "2", "-maxn", "3", "-bucket", "8",
                     "-epoch", "1"], None),
    ("tiny_sup.bin", ["supervised", "-dim", "2", "-wordNgrams", "2", "-bucket", "8", "-epoch", "1",
                      "-loss", "hs"], None),
    ("tiny_sup.ftz", ["supervised", "-dim", "1", "-minn", "2", "-maxn", "3", "-bucket", "300",
                      "-epoch", "1"], ["-cutoff", "256"]),
]

UNSEEN = ["cafés", "naïveté", "東京都", "ラーメン屋", "🍕🍕", "👍🏽", "❤️", "zürichsee", "Ωmega",
          "x", "", "</s>", "robotique", "chiens", "猫猫", "a\u0301",
          # brackets inside a word; labels unknown to the dictionary; words past 254 bytes
          "<", ">", "<>", "a<b>", "__label__unknown", "é" * 200, "🍕" * 70]

SENTENCES = ["the cat eats pizza", "le chat mange du fromage 🧀", "東京 と 北京 の 猫",
             "happy 🙂 joie", "", "   ", "unknownword zzz", "my robot writes code in paris",
             "__label__food pasta", "très heureux avec amour ❤️",
             # fastText's other separators (\v \f \r, and NUL but for unsupervised sentence
             # vectors), "</s>" inside a line (the line ends there), labels only, a long word
             "a\vb\fc", "x\0y z", "a\rb cat", "pizza </s> cat", "</s> after eos",
             "__label__food __label__city", "é" * 300 + " chat"]

ANALOGIES = [("paris", "france", "tokyo"), ("cat", "chat", "dog"), ("猫", "cat", "犬"),
             ("pizza", "🍕", "sushi")]


def corpus(tags, lines=1000, seed=23):
    """A small multilingual corpus: topics with their words in several scripts, one or two topic
    labels a line and, with `tags`, one of 260 tag labels too (for a classifier of 266 labels)."""
    rng = random.Random(seed)
    topics = {
        "food": "pizza 🍕 pasta sushi 寿司 ramen ラーメン croissant café crème brûlée fromage "
                "cheese bread pain pomme apple 苹果 mango 🍎 soup soupe délicieux",
        "city": "paris tokyo 東京 london berlin münchen zürich kraków москва 北京 roma madrid "
                "córdoba málaga são paulo 🗼 france japan 日本 city ville",
        "animal": "cat chat 猫 dog chien 犬 🐱 🐶 bird oiseau 鳥 horse cheval fish poisson 🐟 "
                  "mouse souris",
        "tech": "computer ordinateur 电脑 phone téléphone 🚀 rocket code 代码 robot ロボット "
                "internet réseau données data software",
        "mood": "happy heureux 😊 🙂 sad triste 😢 love amour ❤️ 愛 joy joie fear peur calm "
                "calme",
        "sport": "football fútbol サッカー tennis ⚽ 🎾 match équipe team goal but coach "
                 "entraîneur",
    }
    fillers = "the a le la de et and is est very très in dans with avec 的 は が my mon du".split()
    syllables = ["ka", "no", "lu", "mé", "ri", "bo", "zu", "ña", "ké", "sa", "to", "mi", "rà"]
    rare = sorted({"".join(rng.choice(syllables) for _ in range(3)) for _ in range(400)})[:260]
    names = sorted(topics)
    out = []
    for i in range(lines):
        topic = names[i % len(names)]
        labels = ["__label__" + topic]
        if rng.random() < 0.2:
            labels.append("__label__" + rng.choice([t for t in names if t != topic]))
        tag = "__label__tag%03d" % rng.randrange(260)
        if tags:
            labels.append(tag)
        words = topics[topic].split()
        n = rng.randint(4, 10)
        toks = [rng.choice(words) if rng.random() < 0.6 else rng.choice(fillers) for _ in range(n)]
        if rng.random() < 0.3:
            toks.insert(rng.randrange(len(toks) + 1), rng.choice(rare))
        rng.shuffle(labels)
        out.append(" ".join(labels + toks))
    return "\n".join(out) + "\n"


def tiny_corpus():
    return ("__label__a le chat 猫 mange\n__label__b the dog 犬 runs\n"
            "__label__a café crème 🍕\n__label__b naïve ❤️ dog\n")


def run(cmd, cwd):
    subprocess.run(["fasttext"] + cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def write_corpora(outdir, seed=23):
    for name, tags in (("corpus.txt", False), ("corpus_tags.txt", True)):
        with open(os.path.join(outdir, name), "w", encoding="utf-8") as f:
            f.write(corpus(tags, seed=seed))


def train(outdir):
    """Trains every model of MODELS and QUANTIZED in outdir (which holds the corpora)."""
    os.makedirs(outdir, exist_ok=True)
    inputs = {}
    for name, corpus_path, cmd in MODELS:
        inputs[name] = corpus_path
        run(cmd + ["-input", corpus_path, "-output", name] + COMMON, outdir)
        os.remove(os.path.join(outdir, name + ".vec"))
    for name, opts in QUANTIZED:
        # quantize rewrites <output>.ftz from <output>.bin; train on a copy so the .bin stays.
        shutil.copy(os.path.join(outdir, name + ".bin"), os.path.join(outdir, "q_" + name + ".bin"))
        run(["quantize", "-input", inputs[name], "-output", "q_" + name] + opts +
            ["-thread", "1", "-verbose", "0"], outdir)
        os.replace(os.path.join(outdir, "q_" + name + ".ftz"), os.path.join(outdir, name + ".ftz"))
        os.remove(os.path.join(outdir, "q_" + name + ".bin"))
        vec = os.path.join(outdir, "q_" + name + ".vec")
        if os.path.exists(vec):
            os.remove(vec)


def fmt(x):
    return "%.9g" % x


def write_answers(model_path, out_path, all_words, pruned):
    """One record a line, fields separated by tabs, lists inside a field by spaces:

    args     dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate
    quant    0|1
    word     <word> <count>                      every word, in id order
    label    <label> <count>                     every label, in id order
    vector   <word> v1 ... vd                    get_word_vector (%.9g: float32 round trips)
    subwords <word> ngram ...  id ...            get_subwords
    nn       <word> <k> word score ...           get_nearest_neighbors
    analogy  <a> <b> <c> <k> word score ...      get_analogies (a - b + c)
    sentence <text> v1 ... vd                    get_sentence_vector
    predict  <text> <k> <threshold> label prob ...   predict
    """
    import fasttext
    fasttext.FastText.eprint = lambda *a, **k: None  # load_model's warning
    m = fasttext.load_model(model_path)
    a = m.f.getArgs()
    rec = []
    rec.append(["args"] + [str(v) for v in (a.dim, a.ws, a.epoch, a.minCount, a.neg, a.wordNgrams,
                                            int(a.loss), int(a.model), a.bucket, a.minn, a.maxn,
                                            a.lrUpdateRate)])
    rec.append(["quant", "1" if m.is_quantized() else "0"])
    words, counts = m.get_words(include_freq=True)
    for w, c in zip(words, counts):
        rec.append(["word", w, str(c)])
    supervised = a.model == fasttext.FastText.model_name.supervised
    labels = []
    if supervised:
        labels, lcounts = m.get_labels(include_freq=True)
        for w, c in zip(labels, lcounts):
            rec.append(["label", w, str(c)])
    seen = list(words) if all_words else [w for i, w in enumerate(words) if i % 15 == 0]
    # A label looked up as a word reads input row nwords + label id (fastText's quirk): only
    # where that row exists (not with bucket 0, nor in a pruned model).
    label_probes = ["__label__food", "__label__tag007"] if a.bucket >= 300 and not pruned else []
    probes = seen + UNSEEN + label_probes
    for w in probes:
        rec.append(["vector", w, " ".join(fmt(v) for v in m.get_word_vector(w))])
        grams, ids = m.get_subwords(w)
        rec.append(["subwords", w, " ".join(grams), " ".join(str(i) for i in ids)])
    nn_words = seen[:20] + UNSEEN[:8] if not all_words else seen + UNSEEN
    for w in nn_words:
        if w == "":
            continue
        res = m.get_nearest_neighbors(w, k=5)
        rec.append(["nn", w, "5", " ".join("%s %s" % (word, fmt(s)) for s, word in res)])
    for x, y, z in ANALOGIES:
        res = m.get_analogies(x, y, z, k=4)
        rec.append(["analogy", x, y, z, "4", " ".join("%s %s" % (word, fmt(s)) for s, word in res)])
    for s in SENTENCES:
        rec.append(["sentence", s, " ".join(fmt(v) for v in m.get_sentence_vector(s))])
    if supervised:
        stop = len(words) if all_words else 30
        lines = SENTENCES + [" ".join(words[i:i + 6]) for i in range(0, stop, 6)]
        for i, s in enumerate(lines):
            few = i < 5 or all_words
            cases = [(1, 0.0), (5, 0.0)]
            if few or len(labels) < 20:
                cases.append((-1, 0.01))
            if few:
                cases += [(3, 0.2), (2, 0.5), (1000, 0.0)]  # k beyond the labels: all of them
            if i < (3 if len(labels) < 20 or all_words else 1):
                cases.append((-1, 0.0))  # every label (hs: those above e^-11.5)
            for k, th in cases:
                got, probs = m.predict(s, k=k, threshold=th)
                rec.append(["predict", s, str(k), fmt(th),
                            " ".join("%s %s" % (l, fmt(p)) for l, p in zip(got, probs))])
    with open(out_path, "w", encoding="utf-8") as f:
        for r in rec:
            assert all("\t" not in x and "\n" not in x for x in r), r
            f.write("\t".join(r) + "\n")


def answers(outdir, all_words):
    for name in sorted(os.listdir(outdir)):
        if name.endswith(".bin") or name.endswith(".ftz"):
            pruned = name.endswith(".ftz") and name[:-4] in PRUNED
            write_answers(os.path.join(outdir, name), os.path.join(outdir, name + ".tsv"),
                          all_words, pruned)


def fuzz_seeds():
    tmp = os.path.join(HERE, "_fuzz_tmp")
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "tiny.txt"), "w", encoding="utf-8") as f:
        f.write(tiny_corpus())
    os.makedirs(FUZZ_SEEDS, exist_ok=True)
    for name, cmd, quant in FUZZ_MODELS:
        stem = name.rsplit(".", 1)[0]
        run(cmd + ["-input", "tiny.txt", "-output", stem] + COMMON, tmp)
        if quant is not None:
            run(["quantize", "-input", "tiny.txt", "-output", stem] + quant + ["-verbose", "0"], tmp)
        shutil.copy(os.path.join(tmp, name), os.path.join(FUZZ_SEEDS, name))
    shutil.rmtree(tmp)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "live":
        try:
            import fasttext  # noqa: F401
        except ImportError:
            print("fastText's Python module is not installed: skipped")
            return 77
        if shutil.which("fasttext") is None:
            print("the fasttext command is not installed: skipped")
            return 77
        outdir = sys.argv[2]
        if os.path.isdir(outdir):
            shutil.rmtree(outdir)
        os.makedirs(outdir)
        write_corpora(outdir, seed=101)  # another corpus than the committed models'
        train(outdir)
        answers(outdir, all_words=True)
        return 0
    write_corpora(HERE)
    train(HERE)
    answers(HERE, all_words=False)
    for name in ("corpus.txt", "corpus_tags.txt"):  # regenerated, not committed
        os.remove(os.path.join(HERE, name))
    fuzz_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())

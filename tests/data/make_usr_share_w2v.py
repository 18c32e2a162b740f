# Trains a word2vec table on the English text installed under /usr/share (licences, copyright
# files, READMEs): a real trained table, larger than the test fixture.
import glob, gzip, os, re, sys
from gensim.models import Word2Vec
files = glob.glob('/usr/share/common-licenses/*') + glob.glob('/usr/share/doc/*/copyright') + \
        glob.glob('/usr/share/doc/*/README*') + glob.glob('/usr/share/doc/*/changelog*.gz') + \
        glob.glob('/usr/share/doc/*/NEWS*')
sents = []
for f in files:
    try:
        data = gzip.open(f, 'rt', errors='ignore').read() if f.endswith('.gz') else open(f, errors='ignore').read()
    except Exception:
        continue
    for line in data.splitlines():
        toks = re.findall(r"[a-z]+", line.lower())
        if len(toks) > 2:
            sents.append(toks)
print(len(files), 'files', len(sents), 'sentences', sum(map(len, sents)), 'tokens', file=sys.stderr)
m = Word2Vec(sents, vector_size=128, window=5, min_count=5, workers=1, seed=1, epochs=5)
m.wv.save_word2vec_format('/tmp/beyond_corpus/usr_share_w2v.bin', binary=True)
print(len(m.wv), 'words', file=sys.stderr)

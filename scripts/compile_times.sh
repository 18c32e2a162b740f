#!/usr/bin/env bash
# Compile time of typical translation units: the median user CPU seconds of REPS compiles of each
# file (default: a hello with only embedding.hpp, and the examples), as a consumer compiles them
# (g++ -std=c++20 -O2 -c, ember and Eigen only), for one or more source trees side by side, the
# trees interleaved so that each sees the same machine load.
#
#   scripts/compile_times.sh [TREE...]        (default: this tree)
#   REPS=5 CXX=clang++ CXXFLAGS="-O0" scripts/compile_times.sh . ../other-checkout
#
# Prints one line per file: its name and the median seconds for each tree, in order.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
reps=${REPS:-3}
cxx=${CXX:-g++}
flags=${CXXFLAGS:--O2}
trees=("$@")
((${#trees[@]})) || trees=(.)
eigen=${EIGEN_INCLUDE:-/usr/include/eigen3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/hello_embedding.cpp" <<'EOF'
#include <ember/embedding.hpp>
int main() {
  ember::Embedding<float> emb(10, 4, 1);
  const std::vector<int> ids{1, 2};
  return emb.forward(ids)(0, 0) > 100.0f ? 1 : 0;
}
EOF

files=("$work/hello_embedding.cpp" examples/quickstart.cpp examples/tied_lm.cpp
  examples/train_adam.cpp examples/dlrm_click.cpp)
[[ -n ${FILES:-} ]] && read -r -a files <<< "$FILES"

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf '%-24s' "file"
for t in "${trees[@]}"; do printf ' %12s' "$(basename "$(cd "$t" && pwd)")"; done
echo
for f in "${files[@]}"; do
  declare -A times=()
  for ((r = 0; r < reps; ++r)); do
    for t in "${trees[@]}"; do
      src=$f
      [[ $f == "$work"/* ]] || src="$t/$f"
      s=$({ /usr/bin/time -f '%U' "$cxx" -std=c++20 $flags -I"$t/include" -isystem "$eigen" \
        -c "$src" -o "$work/out.o"; } 2>&1 | tail -1)
      times[$t]+="$s "
    done
  done
  printf '%-24s' "$(basename "$f")"
  for t in "${trees[@]}"; do
    printf ' %12s' "$(tr ' ' '\n' <<< "${times[$t]}" | grep -v '^$' | median)"
  done
  echo
  unset times
done

#!/bin/sh
# The ctest fasttext.live: trains the fixture models afresh with the installed fastText, records
# its Python module's answers for every word (make_fixtures.py live), then has ember_tests compare
# ("[fasttext_live]"). Exits 77 (ctest: skipped) where fastText or Debian's Python is missing.
#   live.sh <ember_tests> <work dir>
set -u
here=$(dirname "$0")
py=/usr/bin/python3  # Debian's python3-fasttext imports under Debian's interpreter only
if [ ! -x "$py" ]; then
  echo "fasttext.live: /usr/bin/python3 not found: skipped"
  exit 77
fi
"$py" "$here/make_fixtures.py" live "$2" || exit $?
EMBER_FASTTEXT_LIVE_DIR="$2" exec "$1" "[fasttext_live]"

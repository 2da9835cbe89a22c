#!/usr/bin/env bash
# TF-IDF benchmark with its peer in one run: sklearn TfidfVectorizer(max_features=1199).fit_transform, then
# bench_tfidf (read + fit + transform) on the same aclImdb reviews, which prints the ratio. Extracts the data.
set -euo pipefail

usage="usage: bench/tfidf.sh [BENCH_TFIDF_BINARY] [ACLIMDB_DIR]"
here="$(cd "$(dirname "$0")" && pwd)"
binary="${1:-}"
if [[ -z "$binary" ]]; then
  for candidate in "$here/../build/bench_tfidf" "$here/../build-release/bench_tfidf"; do
    [[ -x "$candidate" ]] && binary="$candidate" && break
  done
fi
[[ -n "$binary" && -x "$binary" ]] || { echo "no bench_tfidf binary found; $usage" >&2; exit 2; }

folder="${2:-/tmp/aclImdb}"
archive="$here/../../shared/data/aclImdb_v1.tar.gz"
if [[ ! -d "$folder/train/pos" ]]; then
  [[ -f "$archive" ]] || { echo "no $folder and no $archive to extract it from; $usage" >&2; exit 2; }
  echo "extracting $archive to $(dirname "$folder")" >&2
  tar -xzf "$archive" -C "$(dirname "$folder")"
fi

peer_args=()
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
if "$python" -c "import sklearn" 2>/dev/null; then
  peer_json="$("$python" "$here/tfidf_peer.py" "$folder" --repeats 3)"
  echo "$peer_json" >&2
  field() { "$python" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$peer_json" "$1"; }
  peer_args=(--peer-seconds "$(field seconds)" --peer-cpu-seconds "$(field cpu_seconds)")
else
  echo "scikit-learn is missing (apt-get install python3-sklearn): no peer, no ratio" >&2
fi
"$binary" "$folder" --repeats 5 "${peer_args[@]}"

#!/usr/bin/env bash
# Downloads the public data sets dtrain trains on: `mnist [DIR]` (the four official IDX files, md5-checked,
# into DIR, default data/mnist) or `imdb [DIR]` (Stanford's aclImdb_v1.tar.gz, unpacked into DIR/aclImdb,
# default data; a DIR named aclImdb is that folder itself). Either way DIR is what data.path may name:
# `scripts/fetch_data.sh imdb data` and `scripts/fetch_data.sh imdb data/aclImdb` both give data/aclImdb.
set -euo pipefail

usage="usage: scripts/fetch_data.sh mnist [DIR] | imdb [DIR]
  mnist [DIR]  the four IDX files into DIR (default data/mnist)
  imdb [DIR]   the reviews into DIR/aclImdb (default data), or into DIR when it is named aclImdb"
what="${1:-}"

# curl with a short connect timeout; returns non-zero instead of exiting so callers can try the next mirror.
fetch() {
  local url="$1" out="$2"
  curl --fail --location --silent --show-error --connect-timeout 10 --max-time 600 -o "$out.part" "$url" &&
    mv "$out.part" "$out"
}

offline() {
  echo "could not download $1 (offline, or every mirror refused)." >&2
  echo "For MNIST-format data without a network: apt-get install dataset-fashion-mnist puts Fashion-MNIST" >&2
  echo "(same IDX format and file names) at /usr/share/datasets/fashion-mnist; point data.path there." >&2
  exit 1
}

case "$what" in
  mnist)
    dir="${2:-data/mnist}"
    mkdir -p "$dir"
    mirrors=(
      "https://ossci-datasets.s3.amazonaws.com/mnist"
      "https://storage.googleapis.com/cvdf-datasets/mnist"
      "http://yann.lecun.com/exdb/mnist"
    )
    # name md5 (the official files)
    files=(
      "train-images-idx3-ubyte.gz f68b3c2dcbeaaa9fbdd348bbdeb94873"
      "train-labels-idx1-ubyte.gz d53e105ee54ea40749a09fcbcd1e9432"
      "t10k-images-idx3-ubyte.gz 9fb629c4189551a2d022fa330f9573f3"
      "t10k-labels-idx1-ubyte.gz ec29112dd5afa0611ce80d1b7f02629c"
    )
    for entry in "${files[@]}"; do
      read -r name md5 <<<"$entry"
      if [[ -f "$dir/$name" ]] && echo "$md5  $dir/$name" | md5sum --check --status; then
        echo "have $dir/$name"
        continue
      fi
      got=""
      for mirror in "${mirrors[@]}"; do
        if fetch "$mirror/$name" "$dir/$name" 2>/dev/null && echo "$md5  $dir/$name" | md5sum --check --status; then
          got="$mirror"
          break
        fi
        rm -f "$dir/$name" "$dir/$name.part"
      done
      [[ -n "$got" ]] || offline "$name"
      echo "fetched $dir/$name from $got"
    done
    ;;
  imdb)
    dir="${2:-data}"
    dir="${dir%/}"
    # data.path may name the aclImdb folder itself (the hint of a missing data.path passes it here).
    [[ "$(basename "$dir")" == aclImdb ]] && dir="$(dirname "$dir")"
    mkdir -p "$dir"
    if [[ -d "$dir/aclImdb/train/pos" && -d "$dir/aclImdb/test/neg" ]]; then
      echo "have $dir/aclImdb"
      exit 0
    fi
    archive="$dir/aclImdb_v1.tar.gz"
    if [[ ! -f "$archive" ]]; then
      fetch "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz" "$archive" || offline "aclImdb_v1.tar.gz"
    fi
    # The unlabelled train/unsup reviews (50,000 files) are not used: skip them.
    tar -xzf "$archive" -C "$dir" --exclude='aclImdb/train/unsup'
    echo "unpacked $dir/aclImdb"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac

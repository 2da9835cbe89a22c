#!/usr/bin/python3
# Peer for bench_tfidf: scikit-learn TfidfVectorizer(max_features=MAX_TOKENS-1).fit_transform on the same
# aclImdb training reviews. Prints one JSON line: read and fit_transform seconds, fit_transform CPU seconds
# (medians of --repeats).
import argparse
import json
import os
import statistics
import time

from sklearn.feature_extraction.text import TfidfVectorizer


def read_reviews(root):
    texts = []
    for label in ("pos", "neg"):
        folder = os.path.join(root, "train", label)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".txt"):
                with open(os.path.join(folder, name), encoding="utf-8") as review:
                    texts.append(review.read())
    return texts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root", nargs="?", default="/tmp/aclImdb")
    parser.add_argument("--max-tokens", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    read_seconds, fit_seconds, fit_cpu_seconds = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        texts = read_reviews(args.root)
        read_seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        cpu_start = time.process_time()
        matrix = TfidfVectorizer(max_features=args.max_tokens - 1).fit_transform(texts)
        fit_seconds.append(time.perf_counter() - start)
        fit_cpu_seconds.append(time.process_time() - cpu_start)
    print(json.dumps({
        "name": f"sklearn TfidfVectorizer(max_features={args.max_tokens - 1}).fit_transform docs={len(texts)}",
        "read_seconds": round(statistics.median(read_seconds), 4),
        "seconds": round(statistics.median(fit_seconds), 4),
        "cpu_seconds": round(statistics.median(fit_cpu_seconds), 4),
        "shape": list(matrix.shape),
    }))


if __name__ == "__main__":
    main()

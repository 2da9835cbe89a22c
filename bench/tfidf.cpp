// Benchmark: read + fit + transform of the 25,000 aclImdb training reviews with the Keras-exact TF-IDF
// vectorizer (what `dtrain train` does before its first step), then read + transform of the test reviews.
// Usage: bench_tfidf [ACLIMDB_DIR=/tmp/aclImdb] [--max-tokens N=1200] [--repeats R=5] [--peer-seconds S]
// One JSON line per case (median over repeats). --peer-seconds is sklearn's time for the same work,
// measured by bench/tfidf.sh in the same run; it adds peer_seconds and ratio = peer_seconds / seconds
// (and, with --peer-cpu-seconds, cpu_ratio: the same on CPU time, steadier on a shared machine).
// The first 20 vocabulary tokens go to stderr.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/imdb.hpp"
#include "data/tfidf.hpp"

using namespace dtrain::data;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// CPU seconds (user + system, all threads) so far: steadier than wall time on a shared, loaded machine.
double cpu_seconds() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

long long peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return (long long)usage.ru_maxrss * 1024;
}

// A fast wrong answer is a failure: the sparse rows must match the plain dense path on a few documents.
bool rows_agree(const TfidfVectorizer& vectorizer, const SparseRows& rows, const std::vector<std::string>& texts) {
  for (size_t doc : {size_t(0), texts.size() / 2, texts.size() - 1}) {
    std::vector<float> dense = vectorizer.transform_dense(texts[doc]);
    std::vector<float> from_sparse(dense.size(), 0.0f);
    for (int64_t k = rows.offsets[doc]; k < rows.offsets[doc + 1]; ++k)
      from_sparse[size_t(rows.indices[size_t(k)])] = rows.values[size_t(k)];
    if (dense != from_sparse) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string folder = "/tmp/aclImdb";
  int64_t max_tokens = 1200;
  int repeats = 5;
  double peer_seconds = -1, peer_cpu_seconds = -1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--max-tokens" && i + 1 < argc) max_tokens = std::atoll(argv[++i]);
    else if (arg == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--peer-seconds" && i + 1 < argc) peer_seconds = std::atof(argv[++i]);
    else if (arg == "--peer-cpu-seconds" && i + 1 < argc) peer_cpu_seconds = std::atof(argv[++i]);
    else folder = arg;
  }

  std::vector<double> train_seconds, train_cpu_seconds, test_seconds;
  size_t train_docs = 0, test_docs = 0, nonzeros = 0;
  std::vector<std::string> first_tokens;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    double cpu_start = cpu_seconds();
    TextExamples train = read_imdb(folder, "train");
    TfidfVectorizer::FittedRows fitted = TfidfVectorizer::fit_transform(train.texts, max_tokens);
    train_seconds.push_back(seconds_since(start));
    train_cpu_seconds.push_back(cpu_seconds() - cpu_start);

    start = std::chrono::steady_clock::now();
    TextExamples test = read_imdb(folder, "test");
    SparseRows test_rows = fitted.vectorizer.transform(test.texts);
    test_seconds.push_back(seconds_since(start));

    if (!rows_agree(fitted.vectorizer, fitted.rows, train.texts) ||
        !rows_agree(fitted.vectorizer, test_rows, test.texts) || fitted.rows.rows() != int64_t(train.texts.size())) {
      std::fprintf(stderr, "bench_tfidf: sparse rows disagree with the dense reference\n");
      return 1;
    }
    train_docs = train.texts.size();
    test_docs = test.texts.size();
    nonzeros = size_t(fitted.rows.nonzeros());
    const std::vector<std::string>& vocabulary = fitted.vectorizer.vocabulary();
    first_tokens.assign(vocabulary.begin(), vocabulary.begin() + std::min<ptrdiff_t>(20, ptrdiff_t(vocabulary.size())));
  }

  std::fprintf(stderr, "first 20 vocabulary tokens (max_tokens=%lld):", (long long)max_tokens);
  for (const std::string& token : first_tokens) std::fprintf(stderr, " %s", token.c_str());
  std::fprintf(stderr, "\n");

  double train_median = median(train_seconds);
  std::printf("{\"name\": \"tfidf read+fit+transform aclImdb/train docs=%zu max_tokens=%lld threads=%d\", "
              "\"docs_per_s\": %.0f, \"seconds\": %.4f, \"cpu_seconds\": %.4f, \"peak_rss_bytes\": %lld, "
              "\"nonzeros\": %zu, \"repeats\": %d",
              train_docs, (long long)max_tokens, default_threads(), double(train_docs) / train_median, train_median,
              median(train_cpu_seconds), peak_rss_bytes(), nonzeros, repeats);
  if (peer_seconds > 0) {
    std::printf(", \"peer\": \"sklearn TfidfVectorizer(max_features=%lld).fit_transform (reading not timed)\", "
                "\"peer_seconds\": %.4f, \"peer_docs_per_s\": %.0f, \"ratio\": %.2f",
                (long long)max_tokens - 1, peer_seconds, double(train_docs) / peer_seconds, peer_seconds / train_median);
  }
  if (peer_cpu_seconds > 0) {
    std::printf(", \"peer_cpu_seconds\": %.4f, \"cpu_ratio\": %.2f", peer_cpu_seconds,
                peer_cpu_seconds / median(train_cpu_seconds));
  }
  std::printf("}\n");
  double test_median = median(test_seconds);
  std::printf("{\"name\": \"tfidf read+transform aclImdb/test docs=%zu max_tokens=%lld threads=%d\", "
              "\"docs_per_s\": %.0f, \"seconds\": %.4f, \"peak_rss_bytes\": %lld, \"repeats\": %d}\n",
              test_docs, (long long)max_tokens, default_threads(), double(test_docs) / test_median, test_median,
              peak_rss_bytes(), repeats);
  return 0;
}

// TF-IDF exactly as Keras TextVectorization(output_mode='tf_idf', max_tokens=N) computes it (checked
// against real Keras in tests/golden): vocabulary = "[UNK]" then the N-1 most frequent tokens by total
// count, ties broken by token bytes, larger first; idf = ln(1 + docs / (1 + doc_freq)) in double rounded to
// float, "[UNK]"'s idf = mean of the others; output[i] = count of token i * idf[i], where every
// out-of-vocabulary token counts toward "[UNK]" (column 0). Rows come out sparse.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.hpp"
#include "data/parallel.hpp"

namespace dtrain::data {

class TfidfVectorizer {
 public:
  static constexpr std::string_view unknown_token = "[UNK]";

  // Learns vocabulary and idf from `docs` (Keras `adapt`). max_tokens >= 2, as in Keras; the vocabulary
  // is smaller when the corpus has fewer distinct tokens.
  static TfidfVectorizer fit(std::span<const std::string> docs, int64_t max_tokens,
                             int threads = default_threads());
  // fit() then transform() of the same docs, in one tokenization pass (what training does).
  struct FittedRows;
  static FittedRows fit_transform(std::span<const std::string> docs, int64_t max_tokens,
                                  int threads = default_threads());
  // A fitted vectorizer from its weights: vocabulary[0] must be "[UNK]", one idf per token.
  static TfidfVectorizer from_weights(std::vector<std::string> vocabulary, std::vector<float> idf);
  // vocabulary.txt (one token a line, "[UNK]" first) and idf_weights.txt ("%.9g", one a line) in folder.
  static TfidfVectorizer load(const std::string& folder);
  void save(const std::string& folder) const;

  SparseRows transform(std::span<const std::string> docs, int threads = default_threads()) const;
  // One document as a dense row of size() floats (for predict).
  std::vector<float> transform_dense(std::string_view doc) const;

  int64_t size() const { return int64_t(vocabulary_.size()); }
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }
  const std::vector<float>& idf() const { return idf_; }
  // Column of a standardized token; 0 ("[UNK]") when it is not in the vocabulary.
  int32_t column_of(std::string_view token) const;

 private:
  struct Index;  // token -> column hash table
  TfidfVectorizer(std::vector<std::string> vocabulary, std::vector<float> idf);

  std::vector<std::string> vocabulary_;
  std::vector<float> idf_;
  std::shared_ptr<const Index> index_;
};

struct TfidfVectorizer::FittedRows {
  TfidfVectorizer vectorizer;
  SparseRows rows;
};

}  // namespace dtrain::data

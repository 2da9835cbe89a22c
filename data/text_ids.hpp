// Token ids exactly as Keras TextVectorization(output_mode='int', max_tokens=N, output_sequence_length=L)
// makes them: the standardization and split of text.hpp; vocabulary = "" (padding, id 0), "[UNK]" (id 1),
// then the N-2 most frequent tokens by total count, ties broken by token bytes, larger first (Keras'
// np.lexsort((tokens, counts))[::-1], as tfidf.hpp); a token outside the vocabulary is 1. Each document
// becomes L ids: by default its first L tokens, padded with 0 at the end (TextVectorization); Ends picks
// keras.utils.pad_sequences' other ends: truncating 'pre' keeps the LAST L tokens, padding 'pre' puts the
// zeros first (pad_sequences' defaults, which Keras' IMDB examples use).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/parallel.hpp"
#include "data/tfidf.hpp"

namespace dtrain::data {

// Where a document longer than L loses tokens and where a shorter one gets its zeros (pad_sequences' names).
struct SequenceEnds {
  bool truncate_front = false;  // truncating: 'pre' (true) or 'post'
  bool pad_front = false;       // padding: 'pre' (true) or 'post'
};

class TokenIdVectorizer {
 public:
  using Ends = SequenceEnds;
  static constexpr std::string_view padding_token = "";
  static constexpr std::string_view unknown_token = "[UNK]";

  // Learns the vocabulary from `docs` (Keras `adapt`). max_tokens counts "" and "[UNK]" (at least 3; 0 = no
  // limit); the vocabulary is smaller when the corpus has fewer distinct tokens. sequence_length >= 1.
  static TokenIdVectorizer fit(std::span<const std::string> docs, int64_t max_tokens, int64_t sequence_length,
                               int threads = default_threads(), Ends ends = {});
  // From a vocabulary as Keras' get_vocabulary() lists it: "", "[UNK]", then the tokens.
  static TokenIdVectorizer from_vocabulary(std::vector<std::string> vocabulary, int64_t sequence_length, Ends ends = {});

  // [docs.size(), sequence_length] ids, row-major, as floats (the form labels and the embedding op take).
  std::vector<float> transform(std::span<const std::string> docs, int threads = default_threads()) const;
  // One document's sequence_length ids.
  std::vector<float> transform_one(std::string_view doc) const;

  // The id of a standardized token: its vocabulary index, 1 ("[UNK]") when it has none.
  int32_t id_of(std::string_view token) const;
  int64_t size() const { return int64_t(vocabulary_.size()); }
  int64_t sequence_length() const { return sequence_length_; }
  Ends ends() const { return ends_; }
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }

 private:
  TokenIdVectorizer(std::vector<std::string> vocabulary, int64_t sequence_length, Ends ends);

  std::vector<std::string> vocabulary_;
  int64_t sequence_length_;
  Ends ends_;
  TfidfVectorizer lookup_;  // its column of a token is the id - 1: "[UNK]" first, then the same tokens
};

}  // namespace dtrain::data

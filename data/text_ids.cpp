#include "data/text_ids.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "data/text.hpp"

namespace dtrain::data {
namespace {

// The token lookup: a TfidfVectorizer over "[UNK]" and the tokens, whose columns are the ids less one (its
// weights are unused).
TfidfVectorizer lookup_for(const std::vector<std::string>& vocabulary) {
  std::vector<std::string> columns(vocabulary.begin() + 1, vocabulary.end());
  std::vector<float> unused(columns.size(), 0.0f);
  return TfidfVectorizer::from_weights(std::move(columns), std::move(unused));
}

std::vector<std::string> checked(std::vector<std::string> vocabulary) {
  DTRAIN_CHECK_USAGE(vocabulary.size() >= 2 && vocabulary[0] == TokenIdVectorizer::padding_token &&
                         vocabulary[1] == TokenIdVectorizer::unknown_token,
                     "[text_ids] a vocabulary starts with '' and '[UNK]'");
  return vocabulary;
}

}  // namespace

TokenIdVectorizer::TokenIdVectorizer(std::vector<std::string> vocabulary, int64_t sequence_length, Ends ends)
    : vocabulary_(checked(std::move(vocabulary))), sequence_length_(sequence_length), ends_(ends),
      lookup_(lookup_for(vocabulary_)) {
  DTRAIN_CHECK_USAGE(sequence_length >= 1, "[text_ids] output_sequence_length must be at least 1, got {}",
                     sequence_length);
}

TokenIdVectorizer TokenIdVectorizer::fit(std::span<const std::string> docs, int64_t max_tokens,
                                         int64_t sequence_length, int threads, Ends ends) {
  DTRAIN_CHECK_USAGE(max_tokens == 0 || max_tokens >= 3,
                     "[text_ids] max_tokens must be at least 3 ('', '[UNK]' and one token) or 0 for no limit, got {}",
                     max_tokens);
  DTRAIN_CHECK_USAGE(sequence_length >= 1, "[text_ids] output_sequence_length must be at least 1, got {}",
                     sequence_length);
  // TF-IDF's vocabulary is "[UNK]" then the most frequent tokens in Keras' order: the same tokens, one id later.
  const int64_t columns = max_tokens == 0 ? std::numeric_limits<int64_t>::max() / 2 : max_tokens - 1;
  TfidfVectorizer counted = TfidfVectorizer::fit(docs, columns, threads);
  std::vector<std::string> vocabulary{std::string(padding_token)};
  vocabulary.insert(vocabulary.end(), counted.vocabulary().begin(), counted.vocabulary().end());
  return TokenIdVectorizer(std::move(vocabulary), sequence_length, ends);
}

TokenIdVectorizer TokenIdVectorizer::from_vocabulary(std::vector<std::string> vocabulary, int64_t sequence_length,
                                                     Ends ends) {
  return TokenIdVectorizer(std::move(vocabulary), sequence_length, ends);
}

int32_t TokenIdVectorizer::id_of(std::string_view token) const { return lookup_.column_of(token) + 1; }

std::vector<float> TokenIdVectorizer::transform_one(std::string_view doc) const {
  const size_t length = size_t(sequence_length_);
  std::vector<float> ids(length, 0.0f);
  std::string standardized;
  standardize_into(doc, standardized);
  // The kept ids in order, in ids[0, kept): the first L tokens, or (truncating 'pre') the last L, which
  // wrap around ids as a ring from `count` on and are rotated into order at the end.
  size_t count = 0;
  for_each_token(standardized, [&](std::string_view token) {
    if (count < length) ids[count] = float(id_of(token));
    else if (ends_.truncate_front) ids[count % length] = float(id_of(token));
    ++count;
  });
  const size_t kept = std::min(count, length);
  if (ends_.truncate_front && count > length) std::rotate(ids.begin(), ids.begin() + std::ptrdiff_t(count % length), ids.end());
  if (ends_.pad_front) std::rotate(ids.begin(), ids.begin() + std::ptrdiff_t(kept), ids.end());  // zeros first
  return ids;
}

std::vector<float> TokenIdVectorizer::transform(std::span<const std::string> docs, int threads) const {
  std::vector<float> ids(docs.size() * size_t(sequence_length_), 0.0f);
  parallel_ranges(int64_t(docs.size()), std::max(1, threads), [&](int, int64_t begin, int64_t end) {
    for (int64_t doc = begin; doc < end; ++doc) {
      std::vector<float> row = transform_one(docs[size_t(doc)]);
      std::copy(row.begin(), row.end(), ids.begin() + doc * sequence_length_);
    }
  });
  return ids;
}

}  // namespace dtrain::data

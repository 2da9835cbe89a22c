#include "data/text_vectorizer.hpp"

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/output_dir.hpp"

namespace dtrain::data {
namespace {

void check_mode(const std::string& mode) {
  DTRAIN_CHECK_USAGE(mode == TextVectorizer::tf_idf_mode || mode == TextVectorizer::int_mode,
                     "[text] unknown vectorizer mode '{}' (tf_idf or int)", mode);
}

}  // namespace

TextVectorizer::Fitted TextVectorizer::fit(std::span<const std::string> docs, std::vector<int32_t> labels,
                                           const Settings& settings, int threads) {
  check_mode(settings.mode);
  DTRAIN_CHECK(labels.size() == docs.size(), "[text] {} texts but {} labels", docs.size(), labels.size());
  if (settings.mode == int_mode) {
    TextVectorizer vectorizer(TokenIdVectorizer::fit(docs, settings.max_tokens, settings.sequence_length, threads, settings.ends));
    Dataset dataset = vectorizer.dataset(docs, std::move(labels), threads);
    return Fitted{std::move(vectorizer), std::move(dataset)};
  }
  auto fitted = TfidfVectorizer::fit_transform(docs, settings.max_tokens, threads);  // one tokenization pass
  TextVectorizer vectorizer(std::move(fitted.vectorizer));
  vectorizer.pad_to(settings.max_tokens);
  fitted.rows.columns = vectorizer.width();
  return Fitted{std::move(vectorizer), Dataset::sparse(std::move(fitted.rows), std::move(labels))};
}

TextVectorizer TextVectorizer::restore(std::vector<std::string> vocabulary, std::vector<float> idf,
                                       const Settings& settings) {
  check_mode(settings.mode);
  const bool ids_form = vocabulary.size() >= 2 && vocabulary[0] == TokenIdVectorizer::padding_token &&
                        vocabulary[1] == TokenIdVectorizer::unknown_token && idf.empty();
  const bool tfidf_form = !vocabulary.empty() && vocabulary[0] == TfidfVectorizer::unknown_token &&
                          idf.size() == vocabulary.size();
  if (settings.mode == int_mode) {
    DTRAIN_CHECK_USAGE(ids_form,
                       "[text] the saved vectorizer is not of mode int (its vocabulary must start with '' and '[UNK]', "
                       "with no idf weights){}",
                       tfidf_form ? ": it is a tf_idf one" : "");
    return TextVectorizer(TokenIdVectorizer::from_vocabulary(std::move(vocabulary), settings.sequence_length, settings.ends));
  }
  DTRAIN_CHECK_USAGE(tfidf_form,
                     "[text] the saved vectorizer is not of mode tf_idf (its vocabulary must start with '[UNK]', with "
                     "one idf weight per token){}",
                     ids_form ? ": it is an int one" : "");
  TextVectorizer restored(TfidfVectorizer::from_weights(std::move(vocabulary), std::move(idf)));
  return std::move(restored.pad_to(settings.max_tokens));
}

const std::vector<std::string>& TextVectorizer::vocabulary() const {
  return std::visit([](const auto& v) -> const std::vector<std::string>& { return v.vocabulary(); }, impl_);
}

const std::vector<float>& TextVectorizer::idf() const {
  static const std::vector<float> none;
  const TfidfVectorizer* weights = tfidf();
  return weights ? weights->idf() : none;
}

int64_t TextVectorizer::sequence_length() const {
  const TokenIdVectorizer* ids = token_ids();
  return ids ? ids->sequence_length() : 0;
}

Shape TextVectorizer::example_shape() const {
  const TokenIdVectorizer* ids = token_ids();
  return Shape{ids ? ids->sequence_length() : std::max(tfidf()->size(), padded_columns_)};
}

Dataset TextVectorizer::dataset(std::span<const std::string> docs, std::vector<int32_t> labels, int threads) const {
  DTRAIN_CHECK(labels.size() == docs.size(), "[text] {} texts but {} labels", docs.size(), labels.size());
  if (const TokenIdVectorizer* ids = token_ids())
    return Dataset::dense(ids->transform(docs, threads), example_shape(), std::move(labels));
  SparseRows rows = tfidf()->transform(docs, threads);
  rows.columns = width();
  return Dataset::sparse(std::move(rows), std::move(labels));
}

std::vector<float> TextVectorizer::transform_one(std::string_view doc) const {
  if (const TokenIdVectorizer* ids = token_ids()) return ids->transform_one(doc);
  std::vector<float> row = tfidf()->transform_dense(doc);
  row.resize(size_t(width()), 0.0f);
  return row;
}

void TextVectorizer::save(const std::string& folder) const {
  if (const TfidfVectorizer* weights = tfidf()) {
    weights->save(folder);
    return;
  }
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(folder, error);
  DTRAIN_CHECK(!error, "[text] cannot create folder '{}': {}", path_text(folder), error.message());
  fs::remove(fs::path(folder) / "idf_weights.txt", error);  // an earlier tf_idf run's weights would not match
  std::string text;
  for (const std::string& token : vocabulary()) text += token + "\n";
  const std::string path = (fs::path(folder) / "vocabulary.txt").string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  DTRAIN_CHECK(out.good(), "[text] cannot write '{}'", path_text(path));
}

}  // namespace dtrain::data

// The fitted text vectorizer of an IMDB run, whichever Keras TextVectorization output_mode the config names:
// "tf_idf" (a TfidfVectorizer: sparse rows of vocabulary-size floats) or "int" (a TokenIdVectorizer: dense
// rows of output_sequence_length token ids, as floats). The app holds this one type and never branches on the
// mode: fit on the training texts, turn texts into a Dataset or one text into a dense row, and the state a
// checkpoint keeps (vocabulary; idf, empty in int mode) with the settings that rebuild it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/shape.hpp"
#include "data/dataset.hpp"
#include "data/parallel.hpp"
#include "data/text_ids.hpp"
#include "data/tfidf.hpp"

namespace dtrain::data {

class TextVectorizer {
 public:
  static constexpr std::string_view tf_idf_mode = "tf_idf";
  static constexpr std::string_view int_mode = "int";

  // What a config says: mode "tf_idf" | "int", max_tokens (Keras' meaning in each mode: tf_idf counts
  // "[UNK]", int counts "" and "[UNK]"), and sequence_length and the ends cut or padded (int mode only).
  struct Settings {
    std::string mode{tf_idf_mode};
    int64_t max_tokens = 0;
    int64_t sequence_length = 0;
    TokenIdVectorizer::Ends ends{};
  };
  struct Fitted;

  explicit TextVectorizer(TfidfVectorizer tfidf) : impl_(std::move(tfidf)) {}
  explicit TextVectorizer(TokenIdVectorizer ids) : impl_(std::move(ids)) {}

  // Fits on `docs` (Keras `adapt`) and vectorizes them in the same call: the training split's Dataset.
  // The vocabulary may come out smaller than max_tokens when the texts have fewer distinct tokens (Keras'
  // max_tokens is a cap); TF-IDF rows are then padded to max_tokens columns (Keras' pad_to_max_tokens), so the
  // model's input width is the config's whatever the texts hold.
  static Fitted fit(std::span<const std::string> docs, std::vector<int32_t> labels, const Settings& settings,
                    int threads = default_threads());
  // Rebuilt from what a checkpoint keeps: tf_idf needs one idf per token ("[UNK]" first); int needs the
  // vocabulary as Keras lists it ("", "[UNK]", tokens), an empty idf and settings.sequence_length.
  // UsageError when the vocabulary is not of the settings' mode.
  static TextVectorizer restore(std::vector<std::string> vocabulary, std::vector<float> idf, const Settings& settings);

  std::string_view mode() const { return is_int() ? int_mode : tf_idf_mode; }
  bool is_int() const { return std::holds_alternative<TokenIdVectorizer>(impl_); }
  const std::vector<std::string>& vocabulary() const;
  // The idf weights (tf_idf), empty in int mode.
  const std::vector<float>& idf() const;
  // The tokens of the vocabulary (tf_idf: with "[UNK]"; int: with "" and "[UNK]").
  int64_t size() const { return int64_t(vocabulary().size()); }
  // Ids per text in int mode, 0 in tf_idf mode.
  int64_t sequence_length() const;
  // One example's shape: [max(vocabulary size, max_tokens)] (tf_idf) or [sequence_length] (int).
  Shape example_shape() const;
  int64_t width() const { return example_shape()[0]; }

  // The texts as a Dataset with these labels: sparse TF-IDF rows, or dense rows of ids.
  Dataset dataset(std::span<const std::string> docs, std::vector<int32_t> labels, int threads = default_threads()) const;
  // One text as a dense row of width() floats (for predict).
  std::vector<float> transform_one(std::string_view doc) const;

  // Into folder: vocabulary.txt (one token a line, as vocabulary() lists them: int mode's first line is the
  // empty padding token) and, in tf_idf mode, idf_weights.txt.
  void save(const std::string& folder) const;

  const TfidfVectorizer* tfidf() const { return std::get_if<TfidfVectorizer>(&impl_); }
  // TF-IDF rows padded to `columns` (at least the vocabulary's size).
  TextVectorizer& pad_to(int64_t columns) {
    padded_columns_ = columns;
    return *this;
  }
  const TokenIdVectorizer* token_ids() const { return std::get_if<TokenIdVectorizer>(&impl_); }

 private:
  std::variant<TfidfVectorizer, TokenIdVectorizer> impl_;
  int64_t padded_columns_ = 0;  // tf_idf: the row width when above the vocabulary's size
};

struct TextVectorizer::Fitted {
  TextVectorizer vectorizer;
  Dataset dataset;
};

}  // namespace dtrain::data

// data::TextVectorizer and the IMDB pipeline in both modes of data.vectorizer (tf_idf, int): the type
// itself against TfidfVectorizer and TokenIdVectorizer, load_data on a small generated aclImdb tree (dense
// rows of output_sequence_length ids in int mode), and an int-mode run's checkpoint: its vocabulary saved
// with no idf weights, the vectorizer rebuilt from it for eval, predict and resume, and those commands run.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "engine/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "data/imdb.hpp"
#include "data/text_vectorizer.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using dtrain::testing::thrown;
namespace fs = std::filesystem;

namespace {

// load_data's IMDB splits are in-memory datasets.
const data::Dataset& dataset_of(const train::BatchSource& source) { return dynamic_cast<const DatasetSource&>(source).dataset(); }

const std::vector<std::string> kDocs{
    "A great movie, I loved it!", "Bad film. Boring, boring, boring.", "great great acting; weak plot",
    "the plot was fine <br /> the ending was not", "Loved the acting, hated the ending and the plot and the music"};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// DIR/aclImdb/{train,test}/{pos,neg}/<i>_<rating>.txt: reviews of 3 to 23 words over a small vocabulary, the
// positive ones leaning on "great", the negative ones on "bad"; test reviews add words never trained on.
fs::path make_imdb(const fs::path& folder, int per_folder) {
  const std::vector<std::string> words{"movie", "film", "plot", "acting", "the", "a", "was", "ending", "music", "and"};
  fs::path root = folder / "aclImdb";
  for (const std::string split : {"train", "test"}) {
    for (const std::string label : {"pos", "neg"}) {
      fs::create_directories(root / split / label);
      for (int i = 0; i < per_folder; ++i) {
        std::string text = label == "pos" ? "Great" : "Bad";
        for (int w = 0; w < 2 + (i * 7) % 21; ++w) text += " " + words[size_t((i * 3 + w * w) % int(words.size()))];
        if (split == "test") text += " unseen" + std::to_string(i % 3);
        text += label == "pos" ? ", great!" : ". bad.";
        std::ofstream(root / split / label / (std::to_string(i) + "_7.txt")) << text;
      }
    }
  }
  return root;
}

std::string imdb_config(const fs::path& folder, const std::string& vectorizer) {
  return "mesh: {dims: {batch: 2}}\n"
         "data:\n"
         "  dataset: imdb\n"
         "  path: " + (folder / "aclImdb").string() + "\n"
         "  vectorizer: " + vectorizer + "\n"
         "  batch_size: 8\n"
         "model:\n  - {flatten: {}}\n  - {dense: 2}\n"
         "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.01}}}\n"
         "checkpoint: {dir: " + (folder / "ckpt").string() + ", every: epoch}\n"
         "run_dir: " + (folder / "run").string() + "\n";
}

Config parse(const std::string& text) { return parse_config(text, "ids.yaml", LoadOptions{{}, "", false, "", {}}); }

}  // namespace

TEST_CASE("TextVectorizer: int mode is TokenIdVectorizer's ids as dense rows, tf_idf mode TfidfVectorizer's sparse rows") {
  const std::vector<int32_t> labels{1, 0, 1, 0, 1};
  const auto ids = data::TextVectorizer::fit(kDocs, labels, {"int", 8, 6});
  const data::TokenIdVectorizer reference = data::TokenIdVectorizer::fit(kDocs, 8, 6);
  CHECK(ids.vectorizer.is_int());
  CHECK(ids.vectorizer.mode() == "int");
  CHECK(ids.vectorizer.vocabulary() == reference.vocabulary());
  CHECK(ids.vectorizer.vocabulary().size() == 8);
  CHECK(ids.vectorizer.idf().empty());
  CHECK(ids.vectorizer.sequence_length() == 6);
  CHECK(ids.vectorizer.example_shape() == Shape{6});
  CHECK(ids.vectorizer.width() == 6);
  CHECK(!ids.dataset.is_sparse());
  CHECK(ids.dataset.example_shape() == Shape{6});
  CHECK(ids.dataset.labels() == labels);
  CHECK(ids.dataset.dense_features() == reference.transform(kDocs));
  CHECK(ids.vectorizer.dataset(kDocs, labels).dense_features() == reference.transform(kDocs));
  CHECK(ids.vectorizer.transform_one("Boring plot, great acting, unseen words") ==
        reference.transform_one("Boring plot, great acting, unseen words"));
  REQUIRE(ids.vectorizer.token_ids() != nullptr);
  CHECK(ids.vectorizer.tfidf() == nullptr);

  const auto tfidf = data::TextVectorizer::fit(kDocs, labels, {"tf_idf", 9, 0});
  const auto expected = data::TfidfVectorizer::fit_transform(kDocs, 9);
  CHECK(!tfidf.vectorizer.is_int());
  CHECK(tfidf.vectorizer.mode() == "tf_idf");
  CHECK(tfidf.vectorizer.vocabulary() == expected.vectorizer.vocabulary());
  CHECK(tfidf.vectorizer.idf() == expected.vectorizer.idf());
  CHECK(tfidf.vectorizer.sequence_length() == 0);
  CHECK(tfidf.vectorizer.example_shape() == Shape{9});
  CHECK(tfidf.dataset.is_sparse());
  CHECK(tfidf.dataset.sparse_features().indices == expected.rows.indices);
  CHECK(tfidf.dataset.sparse_features().values == expected.rows.values);
  CHECK(tfidf.vectorizer.transform_one("great plot") == expected.vectorizer.transform_dense("great plot"));

  // A corpus with fewer distinct tokens than max_tokens: int mode's vocabulary is just smaller (as in Keras).
  const auto small = data::TextVectorizer::fit(kDocs, labels, {"int", 1000, 4});
  CHECK(small.vectorizer.size() < 1000);
  CHECK(small.vectorizer.example_shape() == Shape{4});
}

TEST_CASE("TextVectorizer::restore rebuilds either mode from what a checkpoint keeps, and refuses the other mode's") {
  const std::vector<int32_t> labels(kDocs.size(), 0);
  const auto ids = data::TextVectorizer::fit(kDocs, labels, {"int", 0, 5});
  const auto tfidf = data::TextVectorizer::fit(kDocs, labels, {"tf_idf", 7, 0});
  const data::TextVectorizer ids_back = data::TextVectorizer::restore(ids.vectorizer.vocabulary(), {}, {"int", 0, 5});
  CHECK(ids_back.is_int());
  CHECK(ids_back.vocabulary() == ids.vectorizer.vocabulary());
  CHECK(ids_back.transform_one(kDocs[4]) == ids.vectorizer.transform_one(kDocs[4]));
  const data::TextVectorizer tfidf_back = data::TextVectorizer::restore(tfidf.vectorizer.vocabulary(),
                                                                        tfidf.vectorizer.idf(), {"tf_idf", 7, 0});
  CHECK(!tfidf_back.is_int());
  CHECK(tfidf_back.transform_one(kDocs[4]) == tfidf.vectorizer.transform_one(kDocs[4]));

  std::string message;
  CHECK(thrown([&] { data::TextVectorizer::restore(tfidf.vectorizer.vocabulary(), tfidf.vectorizer.idf(), {"int", 7, 5}); },
               &message) == "usage");
  CHECK(contains(message, "not of mode int"));
  CHECK(contains(message, "it is a tf_idf one"));
  CHECK(thrown([&] { data::TextVectorizer::restore(ids.vectorizer.vocabulary(), {}, {"tf_idf", 7, 0}); }, &message) ==
        "usage");
  CHECK(contains(message, "it is an int one"));
  CHECK(thrown([&] { data::TextVectorizer::restore(ids.vectorizer.vocabulary(), {}, {"words", 7, 0}); }, &message) ==
        "usage");
  CHECK(contains(message, "unknown vectorizer mode 'words'"));
}

TEST_CASE("tf_idf with fewer distinct tokens than max_tokens: a smaller vocabulary, rows padded to max_tokens") {
  const std::vector<std::string> docs{"a b", "b c", "a c c"};
  data::TextVectorizer::Fitted fitted = data::TextVectorizer::fit(docs, {0, 1, 0}, {"tf_idf", 10, 0});
  CHECK(fitted.vectorizer.size() == 4);  // [UNK], a, b, c
  CHECK(fitted.vectorizer.example_shape() == Shape{10});
  CHECK(fitted.dataset.example_shape() == Shape{10});
  const std::vector<float> row = fitted.vectorizer.transform_one("c a");
  REQUIRE(row.size() == 10);
  for (size_t k = 4; k < 10; ++k) CHECK(row[k] == 0.0f);
  CHECK(row[1] > 0.0f);
  // Restored from a checkpoint with the same settings: the same width and rows.
  const data::TextVectorizer back =
      data::TextVectorizer::restore(fitted.vectorizer.vocabulary(), fitted.vectorizer.idf(), {"tf_idf", 10, 0});
  CHECK(back.example_shape() == Shape{10});
  CHECK(back.transform_one("c a") == row);
}

TEST_CASE("load_data with truncating and padding 'pre': each review's last ids, zeros first (pad_sequences)") {
  dtrain::testing::TempFolder temp("text_ids_pre");
  const fs::path root = make_imdb(temp.path, 12);
  const Config config =
      parse(imdb_config(temp.path, "{mode: int, max_tokens: 1000, output_sequence_length: 4, truncating: pre, padding: pre}"));
  LoadedData loaded = load_data(config);
  const data::TextExamples train = data::read_imdb(root.string(), "train");
  const data::TokenIdVectorizer reference = data::TokenIdVectorizer::fit(train.texts, 1000, 4, 2, {true, true});
  CHECK(dataset_of(*loaded.train).dense_features() == reference.transform(train.texts));
  CHECK(dataset_of(*loaded.train).dense_features() != data::TokenIdVectorizer::fit(train.texts, 1000, 4).transform(train.texts));
}

TEST_CASE("load_data with vectorizer mode int: dense rows of output_sequence_length ids fitted on the training split") {
  dtrain::testing::TempFolder temp("text_ids_load");
  const fs::path root = make_imdb(temp.path, 12);
  const Config config = parse(imdb_config(temp.path, "{mode: int, max_tokens: 1000, output_sequence_length: 10}"));
  CHECK(config.data.example_shape() == std::vector<int64_t>{10});
  LoadedData loaded;
  REQUIRE(thrown([&] { loaded = load_data(config); }) == "none");  // 1000 > the distinct tokens: fine in int mode
  REQUIRE(loaded.vectorizer.has_value());
  CHECK(loaded.vectorizer->is_int());
  CHECK(loaded.vectorizer->size() < 1000);
  CHECK(loaded.num_classes == 2);

  const data::TextExamples train = data::read_imdb(root.string(), "train");
  const data::TextExamples test = data::read_imdb(root.string(), "test");
  const data::TokenIdVectorizer reference = data::TokenIdVectorizer::fit(train.texts, 1000, 10);
  CHECK(loaded.vectorizer->vocabulary() == reference.vocabulary());
  for (const auto* split : {loaded.train.get(), loaded.test.get()}) {
    CHECK(split->example_shape() == Shape{10});
    CHECK(!dataset_of(*split).is_sparse());
    CHECK(split->compressed_features({}, 0, 0, 0, 10) == nullptr);  // dense: no compressed batches
  }
  CHECK(loaded.train->num_examples() == 24);
  CHECK(dataset_of(*loaded.train).dense_features() == reference.transform(train.texts));
  CHECK(dataset_of(*loaded.train).labels() == train.labels);
  CHECK(dataset_of(*loaded.test).dense_features() == reference.transform(test.texts));
  CHECK(dataset_of(*loaded.test).labels() == test.labels);
  // Test words never trained on are "[UNK]" (1); short reviews are padded with 0; every id is below max_tokens.
  bool unknown = false, padded = false;
  for (float id : dataset_of(*loaded.test).dense_features()) {
    unknown = unknown || id == 1.0f;
    padded = padded || id == 0.0f;
    CHECK(id < 1000.0f);
  }
  CHECK(unknown);
  CHECK(padded);

  // The test split alone, vectorized by a given (saved) vectorizer: the same rows.
  LoadedData test_only = load_data(config, false, loaded.vectorizer);
  CHECK(!test_only.train);
  CHECK(dataset_of(*test_only.test).dense_features() == dataset_of(*loaded.test).dense_features());
  // A given vectorizer of another sequence length than the config's input: a usage error naming the config.
  const auto other = data::TextVectorizer::fit(train.texts, train.labels, {"int", 1000, 7});
  std::string message;
  CHECK(thrown([&] { load_data(config, false, other.vectorizer); }, &message) == "usage");
  CHECK(contains(message, "ids.yaml"));
  CHECK(contains(message, "(10)"));

  // tf_idf with fewer distinct tokens than max_tokens (a cap, as in Keras): rows padded to the config's width.
  const Config tfidf = parse(imdb_config(temp.path, "{mode: tf_idf, max_tokens: 1000}"));
  LoadedData capped;
  REQUIRE(thrown([&] { capped = load_data(tfidf); }) == "none");
  CHECK(capped.vectorizer->size() < 1000);
  CHECK(capped.vectorizer->example_shape() == Shape{1000});
  CHECK(dataset_of(*capped.train).example_shape() == Shape{1000});
}

TEST_CASE("an int-mode checkpoint keeps the vocabulary without idf; eval, predict and resume rebuild the vectorizer") {
  dtrain::testing::TempFolder temp("text_ids_ckpt");
  const fs::path root = make_imdb(temp.path, 16);
  const std::string config_path = (temp.path / "ids.yaml").string();
  std::ofstream(config_path) << imdb_config(temp.path, "{mode: int, max_tokens: 40, output_sequence_length: 12}");
  CommandOptions train;
  train.command = "train";
  train.config_path = config_path;
  REQUIRE(run_train(train) == 0);

  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint((temp.path / "ckpt").string()));
  const data::TextExamples texts = data::read_imdb(root.string(), "train");
  const data::TokenIdVectorizer reference = data::TokenIdVectorizer::fit(texts.texts, 40, 12);
  CHECK(index.meta.vocabulary == reference.vocabulary());
  CHECK(index.meta.idf.empty());
  // The run dir holds the vocabulary too (one token a line, "" first), and no idf weights.
  std::ifstream vocabulary_file(temp.path / "run" / "vocabulary.txt");
  std::string first;
  REQUIRE(std::getline(vocabulary_file, first));
  CHECK(first.empty());
  CHECK(!fs::exists(temp.path / "run" / "idf_weights.txt"));

  // Rebuilt from the stored config (what predict does): the ids of a raw review.
  const Config stored = parse_config(index.meta.config, "stored", LoadOptions{{}, "", false, "", {}});
  CHECK(stored.data.vectorizer.mode == "int");
  const std::optional<data::TextVectorizer> saved = saved_vectorizer(index, stored);
  REQUIRE(saved.has_value());
  CHECK(saved->is_int());
  CHECK(saved->sequence_length() == 12);
  CHECK(saved->vocabulary() == reference.vocabulary());
  const std::string review = "A great movie, the acting and the music; a never-seen word";
  CHECK(saved->transform_one(review) == reference.transform_one(review));
  const checkpoint::SaveContext context = save_context(stored, saved, {"neg", "pos"});
  CHECK(context.vocabulary == reference.vocabulary());
  CHECK(context.idf.empty());

  // A config of the other mode, or too small a max_tokens, is refused naming the checkpoint.
  std::string message;
  const Config tfidf = parse(imdb_config(temp.path, "{mode: tf_idf, max_tokens: 40}"));
  CHECK(thrown([&] { saved_vectorizer(index, tfidf); }, &message) == "usage");
  CHECK(contains(message, "ids.yaml: data.vectorizer.mode is tf_idf"));
  CHECK(contains(message, index.folder));
  const Config fewer = parse(imdb_config(temp.path, "{mode: int, max_tokens: 10, output_sequence_length: 12}"));
  CHECK(thrown([&] { saved_vectorizer(index, fewer); }, &message) == "usage");
  CHECK(contains(message, "more than data.vectorizer.max_tokens 10"));

  // The commands themselves, in this process.
  CommandOptions eval;
  eval.command = "eval";
  eval.config_path = config_path;
  CHECK(run_eval(eval) == 0);
  CommandOptions predict;
  predict.command = "predict";
  predict.checkpoint = (temp.path / "ckpt").string();
  predict.texts = {review, "bad bad film"};
  CHECK(run_predict(predict) == 0);
  CommandOptions resume;
  resume.command = "resume";
  resume.config_path = config_path;
  resume.overrides = {"train.epochs=2"};
  CHECK(run_resume(resume) == 0);
  const checkpoint::CheckpointIndex resumed =
      checkpoint::read_index(checkpoint::find_checkpoint((temp.path / "ckpt").string()));
  CHECK(resumed.meta.epochs_done == 2);
  CHECK(resumed.meta.vocabulary == reference.vocabulary());
  CHECK(resumed.meta.idf.empty());
  // Resuming after the training texts changed: another vocabulary.
  std::ofstream(root / "train" / "pos" / "0_7.txt") << "entirely new words here, new new new";
  resume.overrides = {"train.epochs=3"};
  CHECK(thrown([&] { run_resume(resume); }, &message) == "usage");
  CHECK(contains(message, "another int vocabulary"));
}

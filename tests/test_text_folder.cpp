// dataset: text_folder (Keras' text_dataset_from_directory layout) and class names everywhere: a 3-class folder
// trained end to end, whose eval counts per class add up and match a hand count from the model's predictions,
// on one device and on a {batch: 4, model: 2} mesh alike; aclImdb read as a text folder trains bitwise like
// dataset imdb; the class names kept in checkpoints (and an older checkpoint's defaults); data whose classes
// differ from the training split's or the checkpoint's refused; config errors at FILE:LINE:COL.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/train/predict.hpp"
#include "tests/config_errors.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using dtrain::testing::error_of;
using dtrain::testing::position;
using dtrain::testing::replace;
using dtrain::testing::thrown;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ROOT/<split>/<class>/<i>.txt for each class and split: texts over a shared vocabulary, each class leaning on
// its own word (so a few steps learn something, and not everything), `per_class` files a class and split.
void make_text_folder(const fs::path& root, const std::vector<std::string>& splits,
                      const std::vector<std::string>& classes, int per_class) {
  const std::vector<std::string> words{"movie", "film", "plot", "acting", "the", "a", "was", "ending", "music", "and"};
  for (const std::string& split : splits) {
    for (size_t k = 0; k < classes.size(); ++k) {
      fs::create_directories(root / split / classes[k]);
      for (int i = 0; i < per_class; ++i) {
        std::string text;
        for (int w = 0; w < 3 + (i * 5 + int(k)) % 11; ++w) text += words[size_t((i * 3 + w * w + int(k)) % 10)] + " ";
        // Every third text of a class lacks its word: not every one is easy.
        if (i % 3 != 0) text += classes[k] + " " + classes[k];
        std::ofstream(root / split / classes[k] / (std::to_string(i) + ".txt")) << text;
      }
    }
  }
}

// A text_folder config on `mesh`; `extra` goes into the data section.
std::string folder_config(const fs::path& temp, const std::string& mesh, const std::string& extra = "",
                          const std::string& layouts = "") {
  return "mesh: {dims: " + mesh + "}\n"
         "data:\n"
         "  dataset: text_folder\n"
         "  path: " + (temp / "texts").string() + "\n"
         "  vectorizer: {mode: tf_idf, max_tokens: 12}\n"
         "  batch_size: 8\n" + extra +
         "model:\n  - {dense: 6, activation: relu}\n  - {dense: 3}\n" + layouts +
         "train: {epochs: 2, optimizer: {adam: {learning_rate: 0.05}}}\n"
         "checkpoint: {dir: " + (temp / "ckpt").string() + ", every: epoch}\n"
         "run_dir: " + (temp / "run").string() + "\n";
}

fs::path write_config(const fs::path& temp, const std::string& name, const std::string& text) {
  const fs::path path = temp / name;
  std::ofstream(path) << text;
  return path;
}

CommandOptions command(const std::string& name, const fs::path& config = {}) {
  CommandOptions options;
  options.command = name;
  options.config_path = config.string();
  return options;
}

// The test split evaluated from the checkpoint in `temp`/ckpt on the config's mesh.
train::SplitMetrics evaluate(const Config& config, const checkpoint::CheckpointIndex& index) {
  Engine engine = build_engine(config, train_options(config));
  check_model_matches(config, *engine.built.model, index);
  const LoadedData data = load_data(config, false, saved_vectorizer(index, config));
  train::Reporter quiet;
  return engine.trainer->evaluate(*data.test, quiet, checkpoint_hooks(config, nullptr, &index, false));
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("text_folder: 3 classes trained end to end; eval's per-class counts match a hand count, on any mesh") {
  dtrain::testing::TempFolder temp("text_folder_e2e");
  make_text_folder(temp.path / "texts", {"train", "test"}, {"cat", "ant", "bee"}, 7);
  const fs::path path = write_config(temp.path, "t.yaml", folder_config(temp.path, "{batch: 2}"));
  REQUIRE(run_train(command("train", path)) == 0);

  const checkpoint::CheckpointIndex index =
      checkpoint::read_index(checkpoint::find_checkpoint((temp.path / "ckpt").string()));
  // Sorted folder order, as Keras: label 0 is ant.
  CHECK(index.meta.class_names == std::vector<std::string>{"ant", "bee", "cat"});

  // 21 test examples in batches of 8 on {batch: 1}, and on {batch: 4, model: 2} (the last batch of 5 padded to
  // 8, dense1 split over model): the same counts, exactly.
  const Config one = parse_config(folder_config(temp.path, "{batch: 1}"), "one.yaml", LoadOptions{});
  const Config eight = parse_config(
      folder_config(temp.path, "{batch: 4, model: 2}", "", "layouts: {dense1/kernel: [unsharded, model]}\n"),
      "eight.yaml", LoadOptions{});
  const train::SplitMetrics a = evaluate(one, index), b = evaluate(eight, index);
  REQUIRE(a.class_examples.size() == 3);
  CHECK(a.class_examples == b.class_examples);
  CHECK(a.class_correct == b.class_correct);
  CHECK(a.class_examples == std::vector<int64_t>{7, 7, 7});
  int64_t correct = 0;
  for (int64_t c : a.class_correct) correct += c;
  CHECK(double(correct) / 21.0 == doctest::Approx(a.accuracy).epsilon(1e-12));
  CHECK(a.examples == 21);

  // By hand: the model's outputs for the test texts, vectorized with the saved vocabulary.
  const LoadedData data = load_data(one, false, saved_vectorizer(index, one));
  const data::Dataset& test = dynamic_cast<const DatasetSource&>(*data.test).dataset();  // texts load as a DatasetSource
  std::vector<int64_t> all(size_t(test.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = int64_t(i);
  Tensor inputs({test.size(), test.columns()});
  test.densify(all, 0, test.size(), 0, test.columns(), inputs.data());
  std::vector<int32_t> labels(all.size());
  test.gather_labels(all, 0, test.size(), labels.data());
  const MeshPtr mesh = build_mesh(one);
  const BuiltModel built = build_model(one, mesh, one.data.example_shape());
  const Tensor outputs = train::predict(*built.model, mesh, input_specs(one), inputs, 8,
                                        [&](nn::Parameters& params, int rank) {
                                          checkpoint::read_tensors(index, checkpoint::variable_tensors(params), rank);
                                        });
  std::vector<int64_t> hand_examples(3), hand_correct(3);
  for (int64_t i = 0; i < test.size(); ++i) {
    const float* row = outputs.data() + i * 3;
    const int64_t best = std::max_element(row, row + 3) - row;
    ++hand_examples[size_t(labels[size_t(i)])];
    hand_correct[size_t(labels[size_t(i)])] += best == labels[size_t(i)];
  }
  CHECK(a.class_examples == hand_examples);
  CHECK(a.class_correct == hand_correct);
  // Something was learned, and not everything: the counts are not trivially all or nothing.
  CHECK(correct > 7);
  CHECK(correct < 21);

  // The eval command itself: its metrics.jsonl row carries the classes.
  CHECK(run_eval(command("eval", path)) == 0);
  std::ifstream rows(temp.path / "run" / "metrics.jsonl");
  std::string line, last;
  while (std::getline(rows, line)) last = line;
  CHECK(contains(last, "\"split\": \"eval\""));
  CHECK(contains(last, fmt::format("\"classes\": [{{\"name\": \"ant\", \"examples\": 7, \"correct\": {},",
                                   a.class_correct[0])));
  CHECK(contains(last, "{\"name\": \"cat\", \"examples\": 7,"));
}

TEST_CASE("text_folder: classes [neg, pos] on an aclImdb tree trains bitwise like dataset imdb") {
  dtrain::testing::TempFolder temp("text_folder_imdb");
  const fs::path root = temp.path / "aclImdb";
  make_text_folder(root, {"train", "test"}, {"neg", "pos"}, 12);
  make_text_folder(root, {"train"}, {"unsup"}, 5);  // aclImdb's unlabelled reviews: read by neither
  const std::string common = "  path: " + root.string() + "\n"
                             "  vectorizer: {mode: tf_idf, max_tokens: 12}\n"
                             "  batch_size: 8\n"
                             "  shuffle: {seed: 3}\n"
                             "  train_split: train[:20]\n"
                             "model:\n  - {dense: 5, activation: relu}\n  - {dropout: 0.2}\n  - {dense: 2}\n"
                             "train: {epochs: 2, optimizer: {adam: {learning_rate: 0.01}}}\n";
  const Config imdb = parse_config("mesh: {dims: {batch: 2}}\ndata:\n  dataset: imdb\n" + common, "imdb.yaml", LoadOptions{});
  const Config folder = parse_config(
      "mesh: {dims: {batch: 2}}\ndata:\n  dataset: text_folder\n  classes: [neg, pos]\n" + common, "tf.yaml", LoadOptions{});

  std::vector<train::TrainResult> results;
  for (const Config* config : {&imdb, &folder}) {
    Engine engine = build_engine(*config, train_options(*config));
    const LoadedData data = load_data(*config);
    CHECK(data.class_names == std::vector<std::string>{"neg", "pos"});
    CHECK(data.num_classes == 2);
    CHECK(data.train->num_examples() == 20);
    CHECK(data.test->num_examples() == 24);
    train::Reporter quiet;
    results.push_back(engine.trainer->train(*data.train, data.test.get(), quiet));
  }
  const train::TrainResult &a = results[0], &b = results[1];
  REQUIRE(a.step_losses.size() == 6);  // 3 batches (8, 8, 4) an epoch
  REQUIRE(b.step_losses.size() == a.step_losses.size());
  for (size_t i = 0; i < a.step_losses.size(); ++i) CHECK(same_bits(a.step_losses[i], b.step_losses[i]));
  REQUIRE(a.epochs.size() == b.epochs.size());
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    CHECK(same_bits(a.epochs[i].loss, b.epochs[i].loss));
    CHECK(same_bits(a.epochs[i].accuracy, b.epochs[i].accuracy));
    CHECK(a.epochs[i].class_correct == b.epochs[i].class_correct);
  }
}

TEST_CASE("text_folder: the splits must have the same classes; a split is a folder") {
  dtrain::testing::TempFolder temp("text_folder_splits");
  make_text_folder(temp.path / "texts", {"train"}, {"ant", "bee", "cat"}, 4);
  make_text_folder(temp.path / "texts", {"test"}, {"ant", "cat"}, 4);
  make_text_folder(temp.path / "texts", {"valid"}, {"ant", "bee", "cat"}, 2);
  const std::string text = folder_config(temp.path, "{batch: 2}", "  test_split: test\n");
  const Config config = parse_config(text, "t.yaml", LoadOptions{});
  const std::string message = dtrain::testing::usage_error_message([&] { load_data(config); });
  CHECK(contains(message, position("t.yaml", text, "test\n", "test_split") + ": "));
  CHECK(contains(message, "the test split's classes [ant, cat] differ from the training split's [ant, bee, cat]"));
  // data.classes picks the same folders in both.
  const Config picked =
      parse_config(folder_config(temp.path, "{batch: 2}", "  classes: [cat, ant]\n"), "t.yaml", LoadOptions{});
  const LoadedData data = load_data(picked);
  CHECK(data.class_names == std::vector<std::string>{"cat", "ant"});
  CHECK(data.train->num_examples() == 8);
  // Any folder is a split, sliced like TFDS; eval alone takes its classes from the test split.
  const Config valid = parse_config(folder_config(temp.path, "{batch: 2}", "  test_split: valid[:50%]\n"), "t.yaml", LoadOptions{});
  const LoadedData validation = load_data(valid);
  CHECK(validation.test->num_examples() == 3);
  CHECK(validation.class_names == std::vector<std::string>{"ant", "bee", "cat"});
  // data.validation_split: a fraction takes the training split's last examples; a folder must have its classes.
  const Config fraction = parse_config(folder_config(temp.path, "{batch: 2}", "  test_split: valid\n  validation_split: 0.25\n"), "t.yaml", LoadOptions{});
  const LoadedData held_out = load_data(fraction);
  REQUIRE(held_out.validation);
  CHECK(held_out.train->num_examples() == 9);
  CHECK(held_out.validation->num_examples() == 3);
  const Config valid_folder = parse_config(folder_config(temp.path, "{batch: 2}", "  test_split: valid\n  validation_split: valid\n"), "t.yaml", LoadOptions{});
  const LoadedData validated = load_data(valid_folder);
  REQUIRE(validated.validation);
  CHECK(validated.train->num_examples() == 12);
  CHECK(validated.validation->num_examples() == 6);
  const std::string other_text = folder_config(temp.path, "{batch: 2}", "  test_split: valid\n  validation_split: test[:3]\n");
  const Config other = parse_config(other_text, "t.yaml", LoadOptions{});
  const std::string other_message = dtrain::testing::usage_error_message([&] { load_data(other); });
  CHECK(contains(other_message, position("t.yaml", other_text, "test[:3]") + ": "));
  CHECK(contains(other_message, "the validation split's classes [ant, cat] differ from the training split's [ant, bee, cat]"));
  // A split with no folder: a config error at the split.
  const std::string missing_text = folder_config(temp.path, "{batch: 2}", "  test_split: dev[:10]\n");
  const Config missing = parse_config(missing_text, "t.yaml", LoadOptions{});
  const std::string missing_message = dtrain::testing::usage_error_message([&] { load_data(missing); });
  CHECK(contains(missing_message, position("t.yaml", missing_text, "dev[:10]") + ": split 'dev' has no folder"));
  // A given class without a folder names it.
  const Config unknown =
      parse_config(folder_config(temp.path, "{batch: 2}", "  classes: [ant, dog]\n"), "t.yaml", LoadOptions{});
  CHECK(contains(dtrain::testing::usage_error_message([&] { load_data(unknown); }), "(class 'dog')"));
  // A class folder whose name would break eval's and predict's lines.
  make_text_folder(temp.path / "tabs", {"train", "test"}, {"ant", "b\tee"}, 4);
  const Config tabs = parse_config(replace(folder_config(temp.path, "{batch: 2}"), "/texts\n", "/tabs\n"), "t.yaml",
                                   LoadOptions{});
  CHECK(contains(dtrain::testing::usage_error_message([&] { load_data(tabs); }),
                 "[text_folder] class folder '" + (temp.path / "tabs" / "train").string() +
                     "/b\tee' has a control character in its name"));
}

TEST_CASE("text_folder: config errors at FILE:LINE:COL") {
  const std::string text = "mesh: {dims: {batch: 2}}\n"
                           "data:\n"
                           "  dataset: text_folder\n"
                           "  path: texts\n"
                           "  vectorizer: {mode: int, max_tokens: 20, output_sequence_length: 6}\n"
                           "  train_split: train\n"
                           "  batch_size: 8\n"
                           "model:\n  - {embedding: 4}\n  - {global_average_pool: {}}\n  - {dense: 3}\n"
                           "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}\n";
  const Config config = parse_config(text, "t.yaml", dtrain::testing::no_path_check());
  CHECK(config.data.dataset == Dataset::text_folder);
  CHECK(config.data.example_shape() == std::vector<std::int64_t>{6});
  CHECK(config.model[0].embedding.input_dim == 20);  // the int vectorizer's max_tokens, as for imdb
  // dump_config keeps the dataset and its vectorizer: a checkpoint's stored config parses back.
  const Config dumped = parse_config(dump_config(config), "d.yaml", dtrain::testing::no_path_check());
  CHECK(dumped.data.dataset == Dataset::text_folder);
  CHECK(dumped.data.vectorizer.output_sequence_length == 6);

  const std::string no_vectorizer =
      error_of(replace(text, "  vectorizer: {mode: int, max_tokens: 20, output_sequence_length: 6}\n", ""));
  CHECK(contains(no_vectorizer,
                 position("t.yaml", text, "dataset") + ": data: missing required key 'vectorizer' (dataset text_folder)"));
  CHECK(contains(error_of(replace(text, "train_split: train", "train_split: train/x")),
                 position("t.yaml", text, "train\n", "train_split") +
                     ": data.train_split: expected a split: a folder name under data.path"));
  CHECK(contains(error_of(replace(text, "train_split: train", "train_split: 'valid[1.5:]'")),
                 position("t.yaml", text, "train\n", "train_split") + ": data.train_split: expected a split"));
  const std::string with_classes = replace(text, "  batch_size: 8\n", "  batch_size: 8\n  classes: [a, b, a]\n");
  CHECK(contains(error_of(with_classes), position("t.yaml", with_classes, "a]") + ": data.classes[2]: class 'a' is named twice"));
  const std::string one_class = replace(text, "  batch_size: 8\n", "  batch_size: 8\n  classes: [a]\n");
  CHECK(contains(error_of(one_class), position("t.yaml", one_class, "[a]") + ": data.classes: expected a list of at least 2"));
  const std::string dataset = replace(text, "dataset: text_folder", "dataset: text_folders");
  CHECK(contains(error_of(dataset), position("t.yaml", dataset, "text_folders")));
  // A missing path says what layout it wants.
  const std::string path_error = [&] {
    try {
      parse_config(text, "t.yaml", LoadOptions{});
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  // Run from the repo root, a did-you-mean for its 'tests' folder takes the place of the layout.
  CHECK(contains(path_error, position("t.yaml", text, "texts") + ": data.path: 'texts' does not exist"));
  CHECK((contains(path_error, "(expected texts/<split>/<class>/*.txt)") ||
         contains(path_error, "did you mean 'tests'")));
}

TEST_CASE("class names: kept in checkpoints; an older checkpoint gets the defaults; other names are refused") {
  dtrain::testing::TempFolder temp("text_folder_names");
  make_text_folder(temp.path / "texts", {"train", "test"}, {"ant", "bee", "cat"}, 4);
  const fs::path path = write_config(temp.path, "t.yaml", folder_config(temp.path, "{batch: 2}"));
  REQUIRE(run_train(command("train", path)) == 0);
  const checkpoint::CheckpointIndex index =
      checkpoint::read_index(checkpoint::find_checkpoint((temp.path / "ckpt").string()));
  CHECK(index.meta.class_names == std::vector<std::string>{"ant", "bee", "cat"});
  const Config config = parse_config(folder_config(temp.path, "{batch: 2}"), "t.yaml", LoadOptions{});
  CHECK(saved_class_names(index, config) == index.meta.class_names);

  // Other names, or the same in another order: eval and resume refuse them, naming both lists.
  const fs::path reordered = write_config(
      temp.path, "r.yaml", folder_config(temp.path, "{batch: 2}", "  classes: [bee, ant, cat]\n"));
  std::string message;
  CHECK(thrown([&] { run_eval(command("eval", reordered)); }, &message) == "usage");
  CHECK(contains(message, "the data's classes are [bee, ant, cat] but checkpoint"));
  CHECK(contains(message, "was trained on [ant, bee, cat]"));
  CommandOptions resume = command("resume", reordered);
  resume.overrides = {"train.epochs=3"};
  CHECK(thrown([&] { run_resume(resume); }, &message) == "usage");
  CHECK(contains(message, "[bee, ant, cat]"));
  // The same names resume.
  CommandOptions same = command("resume", path);
  same.overrides = {"train.epochs=3"};
  CHECK(run_resume(same) == 0);

  // An older checkpoint (written with no class names, as before they were kept): no /meta/classes, and the
  // data set's defaults stand in (imdb: neg, pos).
  const Config imdb = parse_config("mesh: {dims: {batch: 1}}\ndata: {dataset: imdb, path: x, batch_size: 4, "
                                   "vectorizer: {max_tokens: 12}}\nmodel: [{dense: 2}]\n"
                                   "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}\n",
                                   "i.yaml", dtrain::testing::no_path_check());
  Engine engine = build_engine(imdb, train_options(imdb));
  checkpoint::SaveContext context = save_context(imdb, std::nullopt, {});
  context.run_id = "old-run";
  const fs::path old_dir = temp.path / "old";
  checkpoint::CheckpointManager manager(old_dir.string(), 1, context);
  train::Hooks hooks;
  hooks.want_save = [](const train::Position&, bool end_of_epoch) { return end_of_epoch; };
  hooks.save = [&](train::RankState& state, bool end_of_epoch) { manager.save(state, end_of_epoch); };
  struct Fours : train::BatchSource {
    int64_t num_examples() const override { return 4; }
    Shape example_shape() const override { return {12}; }
    std::vector<int64_t> order(int64_t) const override { return {0, 1, 2, 3}; }
    void fill_features(std::span<const int64_t>, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) const override {
      std::fill(out, out + (r1 - r0) * (c1 - c0), 0.5f);
    }
    void fill_labels(std::span<const int64_t>, int64_t r0, int64_t r1, float* out) const override {
      for (int64_t r = r0; r < r1; ++r) out[r - r0] = float(r % 2);
    }
  } fours;
  train::Reporter quiet;
  engine.trainer->train(fours, nullptr, quiet, hooks);
  const checkpoint::CheckpointIndex old = checkpoint::read_index(checkpoint::find_checkpoint(old_dir.string()));
  CHECK(old.meta.class_names.empty());
  CHECK(saved_class_names(old, imdb) == std::vector<std::string>{"neg", "pos"});
  CHECK(thrown([&] { check_class_names(imdb, old, {"neg", "pos"}); }) == "none");
  CHECK(thrown([&] { check_class_names(imdb, old, {"pos", "neg"}); }, &message) == "usage");
  CHECK(contains(message, "i.yaml: the data's classes are [pos, neg] but checkpoint"));
}

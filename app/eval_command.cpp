// `dtrain eval --config X [--checkpoint DIR] [--split NAME]`: a checkpoint's variables restored onto X's
// mesh and layouts, evaluated on a split of X's data set (IMDB texts vectorized with the saved vectorizer's
// vocabulary, in the mode X's data.vectorizer names: TF-IDF rows or token ids of its output_sequence_length).
// `--split validation` is X's data.validation_split as training took it (a fraction: the training split's
// last examples); a name the data set lacks is refused with its split names and the nearest.
// The result (overall, then per class: accuracy, right and examples of each true label, named by the data's
// class names, which must be the checkpoint's) is printed and appended to RUN_DIR/metrics.jsonl as an "eval"
// row with a "classes" list (run dir: --run-dir, else the config's). --report adds per-class precision,
// recall, F1 and support, their macro and weighted averages and the confusion matrix (core/train/class_report.hpp),
// printed and as the row's "report".
#include <algorithm>
#include <cstdio>

#include "engine/checkpoint_dir.hpp"
#include "engine/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "engine/output_dirs.hpp"
#include "engine/run_outputs.hpp"
#include "engine/split_names.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/train/class_report.hpp"
#include "core/train/metrics_log.hpp"

namespace dtrain {
namespace {
class QuietReporter : public train::Reporter {
 public:
  void on_notice(const std::string& text) override { fmt::print(stderr, "note: {}\n", text); }
};

// --split NAME, checked against the data set's splits; true when it is the config's validation split
// (`validation`, where the config has data.validation_split): then config.data.test_split is left as it is.
bool choose_split(Config& config, const std::string& split) {
  if (split.empty()) return false;
  const Where where{"--split " + split, 0, 0};
  std::string name;
  try {
    name = data::split_name(split);
  } catch (const UsageError& e) {
    throw_config_error(where, e.what());
  }
  const std::vector<std::string> names = split_names(config);
  const bool named = std::find(names.begin(), names.end(), name) != names.end();
  if (split == "validation" && config.data.has_validation()) return true;
  if (split == "validation" && !named)
    throw_config_error(where, fmt::format("{} has no data.validation_split, the examples training validates on; give it "
                                          "one, or evaluate a split of the data set ({})",
                                          config.file, fmt::join(names, ", ")));
  if (!named) {
    const std::vector<std::string> more = config.data.has_validation() ? std::vector<std::string>{"validation"}
                                                                         : std::vector<std::string>{};
    throw_config_error(where, unknown_split(config, name, more));
  }
  config.data.test_split = split;
  config.locations["data.test_split"] = where;
  return false;
}

// What --split validation evaluates, for the printed line: "validation (data.validation_split: 0.25)".
std::string validation_text(const Config& config) {
  const DataConfig& data = config.data;
  return fmt::format("validation (data.validation_split: {})",
                     data.validation_fraction > 0 ? fmt::format("{} of {}", data.validation_fraction, data.train_split)
                                                  : data.validation_split);
}

}  // namespace

int run_eval(const CommandOptions& options) {
  Config config = options.load_config();
  const std::string from = options.checkpoint.empty() ? config.checkpoint.dir : options.checkpoint;
  // The lease keeps a training run from deleting the checkpoint while it is read.
  const checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(from);
  const checkpoint::CheckpointIndex& index = opened.index;
  // The row goes with the run that wrote the checkpoint: its run dir (unless --run-dir names one), not the
  // run dir of the config given here, which may be another run's (process 0 alone writes it). Checked
  // before anything runs.
  std::string run_dir = options.run_dir.empty() ? saved_run_dir(index.meta.config) : options.run_dir;
  const Where run_dir_at = run_dir.empty() || !options.run_dir.empty()
                               ? config.where("run_dir")
                               : Where{fmt::format("the run_dir of {}'s config", path_text(index.folder)), 0, 0};
  if (run_dir.empty()) run_dir = config.run_dir;
  check_output_dir(config, "run_dir", run_dir, &run_dir_at);
  const bool validation = choose_split(config, options.split);
  Engine engine = build_engine(config, train_options(config), MemoryUse::eval);
  const BuiltModel& built = engine.built;
  const MeshPtr& mesh = engine.mesh;
  train::Trainer& trainer = *engine.trainer;
  check_model_matches(config, *built.model, index);

  std::optional<data::TextVectorizer> vectorizer;
  if (is_text(config.data.dataset)) {
    vectorizer = saved_vectorizer(index, config);
    if (!vectorizer) {
      throw UsageError(fmt::format("[eval] checkpoint {} holds no text vectorizer, which evaluating texts needs", index.folder));
    }
  }
  // The validation examples are cut from the training split as training cut them: it is loaded too.
  LoadedData data = load_data(config, validation, vectorizer);
  check_class_names(config, index, data.class_names);  // before the model's output: the more telling error
  check_output_classes(config, *built.model, data.num_classes);
  QuietReporter quiet;
  const train::BatchSource& source = validation ? *data.validation : *data.test;
  const std::string split = validation ? "validation" : config.data.test_split;
  train::SplitMetrics metrics =
      trainer.evaluate(source, quiet, checkpoint_hooks(config, nullptr, &index, false), options.report);
  fmt::print("eval {} (step {}) on mesh {}, split {}: loss {:.8f} accuracy {:.8f} ({} examples)\n", index.folder,
             index.meta.step, mesh_line(engine), validation ? validation_text(config) : split, metrics.loss,
             metrics.accuracy, metrics.examples);
  // Per class (the true label's): its examples and the share of them predicted right.
  for (size_t k = 0; k < metrics.class_examples.size(); ++k) {
    const int64_t examples = metrics.class_examples[k], correct = metrics.class_correct[k];
    fmt::print("  class {}: accuracy {:.8f} ({} of {} examples)\n", data.class_names[k],
               examples ? double(correct) / double(examples) : 0.0, correct, examples);
  }
  std::string report;
  if (options.report) {
    const train::ClassReport scores = train::ClassReport::from_confusion(metrics.confusion, data.class_names.size());
    fmt::print("{}", scores.text(data.class_names));
    report = scores.json(data.class_names);
  }
  if (process_index() == 0) {
    metrics.split = split;
    metrics.step = index.meta.step;
    metrics.epoch = index.meta.epochs_done;
    train::MetricsLog log(run_dir, config.train.tensorboard);
    log.write_eval(train::EvalRow{metrics, index.folder, index.meta.run_id, mesh->describe(), data.class_names, report});
    fmt::print("metrics: {} ({})\n", log.path(),
               options.run_dir.empty() ? fmt::format("the run dir of run {}, which wrote {}", index.meta.run_id, index.folder)
                                       : std::string("--run-dir"));
  }
  return 0;
}

}  // namespace dtrain

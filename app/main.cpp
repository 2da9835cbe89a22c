// dtrain's command line: parses the arguments (CLI11), runs one command, and is the only place that
// catches: bad usage or config -> "dtrain: error: ..." and exit 2; any other failure -> exit 1.
#include <CLI/CLI.hpp>
#include <hdf5.h>

#include <csignal>
#include <cstdio>
#include <cctype>
#include <exception>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/kernels/cpu/cpu_isa.hpp"
#include "core/suggest.hpp"

namespace {

using dtrain::CommandOptions;

struct Command {
  const char* name;
  const char* help;
  int (*run)(const CommandOptions&);
};

const std::vector<Command> kCommands{
    {"train", "Train a model from a config (a fresh run)", dtrain::run_train},
    {"resume", "Continue from the latest checkpoint, restored onto this config's mesh and layouts",
     dtrain::run_resume},
    {"eval", "Evaluate a checkpoint on a split of the config's data set", dtrain::run_eval},
    {"predict", "Class probabilities for texts, images or rows of numbers, from a checkpoint alone", dtrain::run_predict},
    {"inspect", "What a checkpoint holds: step, mesh, variables, layouts, shards", dtrain::run_inspect},
    {"plan", "Dry run: per-device shard shapes, memory, collectives per step", dtrain::run_plan},
    {"diff", "Compare two checkpoints value by value (exit 0: bitwise identical), or with --metrics two runs' losses",
     dtrain::run_diff},
    {"elastic", "Run train or resume under mpirun on a hostfile's hosts; on losing a host, go on from the last "
                "checkpoint on the hosts left", dtrain::run_elastic},
    {"export", "Write a checkpoint's model as ONNX (--onnx) and its variables as safetensors (--safetensors)",
     dtrain::run_export},
};

void add_common_options(CLI::App& command, CommandOptions& options, bool config_required) {
  CLI::Option* config = command.add_option("--config,-c", options.config_path, "The YAML config file");
  if (config_required) config->required();
  command.add_option("--run-dir", options.run_dir, "Where metrics.jsonl, vocabulary and plots go");
  command.add_option("--set", options.overrides, "Override a config value: key.path=value (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

// `text` with its control characters written as escapes (\n, \t, \x1b): an error message stays one line.
std::string one_line(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", int(static_cast<unsigned char>(c)));
    else out += c;
  }
  return out;
}

// Prints the error and returns its exit code. Under mpirun an error that every process meets alike (a bad
// config) is printed once, by process 0, and every process ends with its code; one that a process meets
// alone is printed by it, naming itself (an error from a rank names its device too), and ends the whole job
// at once: its peers would otherwise wait for it.
int fail(const std::string& raw_message, int code) {
  // One line, whatever the input quoted in it (a --set value or a file's content with a newline).
  const std::string message = one_line(raw_message);
  const bool several = dtrain::process_count() > 1;
  if (several && dtrain::failed_alike(message)) {
    if (dtrain::process_index() == 0) std::fprintf(stderr, "dtrain: error: %s\n", message.c_str());
    return code;
  }
  const std::string where =
      several && message.rfind("[process ", 0) != 0
          ? fmt::format("[process {} of {}] ", dtrain::process_index(), dtrain::process_count())
          : "";
  std::fprintf(stderr, "dtrain: error: %s%s\n", where.c_str(), message.c_str());
  dtrain::abort_processes(code);
  return code;
}

// A first argument that is no command and no option: say so plainly, with a suggestion.
std::string unknown_command_message(const std::string& word) {
  std::vector<std::string> names;
  for (const Command& command : kCommands) names.push_back(command.name);
  return fmt::format("unknown command '{}' (expected one of: {}){}", word, fmt::join(names, ", "),
                     dtrain::did_you_mean(word, names));
}

// Under mpirun every process runs the command; process 0 alone prints progress and results (errors are
// printed by whichever process meets them).
void start_processes() {
  dtrain::initialize_processes();
  if (dtrain::process_index() != 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) std::fclose(stdout);
  }
}

// A predict argument that names a file rather than being a text to classify.
bool looks_like_path(const std::string& word) {
  const std::filesystem::path path(word);
  if (std::filesystem::exists(path)) return true;
  std::string extension = path.extension().string();
  for (char& c : extension) c = char(std::tolower(static_cast<unsigned char>(c)));
  return word.find(' ') == std::string::npos &&
         (extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".txt");
}

// Options a command accepts with the others but has no use for: refused, not silently ignored.
void refuse_unused_options(const CommandOptions& options) {
  const std::string& command = options.command;
  if (command == "inspect" || command == "predict" || command == "diff" || command == "export") {
    const char* why = command == "predict" || command == "export" ? "the checkpoint's own config builds the model"
                      : command == "inspect" ? "it reads the checkpoint alone"
                                             : "it compares checkpoints or metrics files alone";
    if (!options.config_path.empty()) throw dtrain::UsageError(fmt::format("{} takes no --config ({})", command, why));
    if (!options.overrides.empty()) throw dtrain::UsageError(fmt::format("{} takes no --set ({})", command, why));
    if (!options.run_dir.empty())
      throw dtrain::UsageError(fmt::format("{} takes no --run-dir (it writes no run outputs)", command));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) makes a write fail with EFBIG, which is reported, instead of killing.
  std::signal(SIGXFSZ, SIG_IGN);
  // HDF5 prints a multi-line HDF5-DIAG stack for every failed call; dtrain reports each failure itself, in
  // one line naming the file.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  CLI::App app{"dtrain: SPMD training from YAML configs, on one device or many", "dtrain"};
  app.require_subcommand(1);
  // The CPU kernel builds too: scripts (scripts/test.sh) read which ones this CPU runs.
  app.set_version_flag("--version", [] { return "dtrain 0.1\n" + dtrain::kernels::cpu_kernels_summary(); });

  CommandOptions options;
  std::vector<std::pair<CLI::App*, const Command*>> subcommands;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    const std::string name = command.name;
    if (name == "elastic") {  // its own options; the command it runs has the others, after --
      sub->add_option("--hostfile", options.hostfile, "Open MPI hostfile: HOST [slots=N] per line")->required();
      sub->add_option("--min-hosts", options.min_hosts, "Stop when fewer hosts than this are left (default 1)");
      sub->add_option("--max-restarts", options.max_restarts, "Restarts at most (default 5)");
      sub->add_option("--mpirun", options.mpirun, "The launcher and its options (default: mpirun)");
      sub->add_option("command", options.elastic_args, "-- train|resume ARGS...")->required();
      subcommands.emplace_back(sub, &command);
      continue;
    }
    // plan --calibrate and --compare need no config: plan's is checked once parsed.
    add_common_options(*sub, options, name == "train" || name == "resume" || name == "eval");
    if (name == "train") sub->add_flag("--overwrite", options.overwrite, "Replace the checkpoints in the checkpoint dir");
    if (name == "train") {
      sub->add_option("--init-from", options.init_from,
                      "Fine-tune: start from this checkpoint's variables (a checkpoint dir or DIR/ckpt-N; "
                      "replaces train.init_from)");
      sub->add_option("--init-skip", options.init_skip,
                      "With --init-from: variables (RE2 pattern, full match) left as initialized (repeatable; "
                      "replaces train.init_skip)")
          ->type_name("PATTERN")
          ->allow_extra_args(false);
    }
    if (name == "resume")
      sub->add_flag("--overwrite", options.overwrite, "Replace another run's checkpoints in the config's checkpoint dir");
    if (name == "resume") sub->add_option("--from", options.from, "Checkpoint dir (default: the config's)");
    if (name == "train" || name == "resume")
      sub->add_option("--profile", options.profile,
                      "Trace steps START .. START+STEPS-1 into RUN_DIR/trace/process-P.trace.json (Chrome trace-event "
                      "JSON; replaces train.profile)")
          ->type_name("START:STEPS");
    if (name == "eval" || name == "predict") {
      CLI::Option* checkpoint = sub->add_option("--checkpoint", options.checkpoint, "Checkpoint dir");
      if (name == "predict") checkpoint->required();
    }
    if (name == "eval") sub->add_option("--split", options.split, "Split to evaluate (default: the test split)");
    if (name == "eval")
      sub->add_flag("--report", options.report,
                    "Also per-class precision, recall, F1 and support, their averages and the confusion matrix");
    if (name == "predict") {
      sub->add_option("texts", options.texts, "Raw texts to classify (IMDB models)");
      sub->add_option("--idx", options.idx_file, "An IDX image file to classify (MNIST models)");
      sub->add_option("--file", options.files,
                      "A file to classify (repeatable): an image (.png, .jpg, .jpeg) for image models, a text (.txt) "
                      "for text models")
          ->allow_extra_args(false);  // one path per --file: a raw text after it stays a text
      sub->add_option("--npy", options.npy_file,
                      "A .npy array of input rows [N, ...input shape] (float32, float64, uint8, integers), for models "
                      "that do not read texts");
      sub->add_option("--csv", options.csv_file,
                      "A CSV file of input rows with a header row (csv models: their feature columns; others: every "
                      "column)");
      sub->add_option("--output", options.output_file,
                      "Write the predictions to this CSV file (index,class,name,p0,p1,...) instead of printing them");
    }
    if (name == "inspect") {
      sub->add_option("dir", options.inspect_dir, "Checkpoint dir")->required();
      sub->add_flag("--verify", options.verify, "Check every file and dataset against its checksums; load nothing");
    }
    if (name == "diff") {
      sub->add_option("paths", options.diff_paths,
                      "Two checkpoints (checkpoint dirs, whose latest is compared, or ckpt-N folders); with --metrics "
                      "two run dirs (or their metrics.jsonl)")
          ->expected(2)
          ->required();
      sub->add_flag("--metrics", options.metrics, "Compare the runs' logged step losses: the first step that differs");
    }
    if (name == "export") {
      sub->add_option("checkpoint", options.checkpoint,
                      "The checkpoint: a checkpoint dir (its latest is exported), a ckpt-N folder or DIR/best")
          ->required();
      sub->add_option("--onnx", options.onnx_file,
                      "Write the model as an ONNX model (opset 17) giving predict's class probabilities; a text "
                      "model's vectorizer goes beside it (FILE's stem + .vectorizer.json)")
          ->type_name("FILE");
      sub->add_option("--safetensors", options.safetensors_file,
                      "Write every variable, by its path (dense1/kernel), as a safetensors file")
          ->type_name("FILE");
    }
    if (name == "plan") sub->add_flag("--echo", options.echo, "Print every config key's resolved value first");
    if (name == "plan")
      sub->add_flag("--search", options.search,
                    "Try other mesh shapes and weight layouts for the same devices; print the five fastest that fit "
                    "(predicted) as --set lines");
    if (name == "plan")
      sub->add_flag("--json", options.json,
                    "Print one JSON object (fits, peak_bytes_per_process, peak_bytes_per_device, collectives, ...) for scripts");
    if (name == "plan")
      sub->add_option("--processes", options.processes, "Plan for `mpirun -np P`: which process holds which devices")
          ->check(CLI::PositiveNumber);
    if (name == "plan") {
      sub->add_flag("--calibrate", options.calibrate,
                    "Measure this machine's kernel and link rates (a few seconds) and cache them for plan's step time");
      sub->add_option("--cluster", options.cluster_file,
                      "Plan for the cluster this YAML file describes (hosts, processes, devices, memory, links)");
      sub->add_option("--compare", options.compare_dir,
                      "Print a run's predicted vs measured peak memory and examples/s (RUN_DIR/metrics.jsonl)")
          ->type_name("RUN_DIR");
    }
    subcommands.emplace_back(sub, &command);
  }

  try {
    start_processes();
    if (argc > 1 && argv[1][0] != '-') {
      const std::string word = argv[1];
      bool known = false;
      for (const Command& command : kCommands) known = known || word == command.name;
      if (!known) return fail(unknown_command_message(word), 2);
    }
    if (argc == 1) {  // `dtrain` alone: what it can do, as --help says it
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
      if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
      return fail(std::string(error.what()) + " (run with --help for usage)", 2);
    }
    for (const auto& [sub, command] : subcommands) {
      if (!sub->parsed()) continue;
      options.command = command->name;
      // `--file a.png b.png`: b.png is read as a text; say what happened instead of the general usage.
      if (options.command == "predict" && !options.files.empty() && !options.texts.empty() &&
          looks_like_path(options.texts.front()))
        throw dtrain::UsageError(fmt::format("predict: '{}' follows --file {}, but each --file takes one path: write "
                                             "--file {} too",
                                             options.texts.front(), options.files.back(), options.texts.front()));
      if (options.command == "predict" &&
          int(!options.texts.empty()) + int(!options.idx_file.empty()) + int(!options.files.empty()) +
                  int(!options.npy_file.empty()) + int(!options.csv_file.empty()) != 1)
        throw dtrain::UsageError(
            "predict: give texts to classify, --file PATH ..., --idx FILE, --npy FILE or --csv FILE (one kind of input)");
      refuse_unused_options(options);
      if (options.command == "plan" && dtrain::wants_plan_time(options)) return dtrain::run_plan_time(options);
      if (options.command == "plan" && options.config_path.empty())
        throw dtrain::UsageError("plan: --config is required (or --calibrate, or --compare RUN_DIR)");
      return command->run(options);
    }
    return fail("no command given", 2);
  } catch (const dtrain::UsageError& error) {
    return fail(error.what(), 2);
  } catch (const std::bad_alloc& error) {
    return fail(fmt::format("out of memory ({}): a size in the config or the data is larger than this machine can hold",
                            error.what()),
                1);
  } catch (const std::exception& error) {
    return fail(error.what(), 1);
  }
}

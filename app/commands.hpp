// app/ is the command line: main.cpp (CLI11; the only place that catches, prints and picks the exit code), the
// config (config.hpp: YAML -> typed structs, every error at FILE:LINE:COL) and one <command>_command.cpp per
// command. What turns a config into a mesh, a model, data sources and a trainer is engine/; below both is core/.
//
// The commands `dtrain` runs, one function each, called by main.cpp after parsing the command line.
// Each returns the process exit code on success and throws dtrain::UsageError (exit 2) or another
// dtrain::Error (exit 1) on failure; main() alone catches and prints.
#pragma once
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/comm/mpi/mpi.hpp"

namespace dtrain {

// What the command line said. Empty strings mean "not given".
struct CommandOptions {
  std::string command;                 // train | resume | eval | predict | inspect | plan | diff | elastic | export
  std::string config_path;             // --config FILE (required for train, resume, eval, plan)
  std::string run_dir;                 // --run-dir DIR: overrides the config's run_dir
  std::vector<std::string> overrides;  // --set key.path=value, in command-line order
  bool overwrite = false;              // train/resume --overwrite: replace the checkpoint dir's other checkpoints
  std::string init_from;               // train --init-from PATH: replaces train.init_from (fine-tuning)
  std::vector<std::string> init_skip;  // train --init-skip PATTERN (repeatable): replaces train.init_skip
  std::string profile;                 // train/resume --profile START:STEPS: replaces train.profile
  std::string from;                    // resume --from DIR: checkpoint dir (default: the config's)
  std::string checkpoint;              // eval/predict --checkpoint DIR; export CKPT
  std::string split;                   // eval --split NAME (default: the config's test split)
  bool report = false;                 // eval --report: precision, recall, F1 per class and the confusion matrix
  std::vector<std::string> texts;      // predict: raw texts to classify
  std::string idx_file;                // predict --idx FILE: images to classify
  std::vector<std::string> files;      // predict --file PATH (repeatable): image or text files, one input each
  std::string npy_file;                // predict --npy FILE: a .npy array of input rows
  std::string csv_file;                // predict --csv FILE: a CSV file of input rows (a header row first)
  std::string output_file;             // predict --output FILE: the predictions as CSV instead of printed lines
  std::string inspect_dir;             // inspect DIR
  bool verify = false;                 // inspect --verify: check checksums, print no tensors
  int processes = 0;                   // plan --processes P: plan for `mpirun -np P` (0: this run's count)
  bool echo = false;                   // plan --echo: print every config key's resolved value first
  bool json = false;                   // plan --json: one JSON object in place of the tables
  bool search = false;                 // plan --search: other meshes and layouts, ranked by predicted step time
  std::vector<std::string> diff_paths; // diff A B: two checkpoints (or with --metrics two run dirs)
  bool metrics = false;                // diff --metrics: compare the runs' logged step losses
  bool calibrate = false;              // plan --calibrate: measure this machine's rates and cache them
  std::string cluster_file;            // plan --cluster FILE: plan for the cluster the file describes
  std::string compare_dir;             // plan --compare RUN_DIR: a run's predictions beside its measurements
  std::string hostfile;                // elastic --hostfile FILE: the hosts to run on
  int min_hosts = 1;                   // elastic --min-hosts K: stop when fewer hosts are left
  int max_restarts = 5;                // elastic --max-restarts N
  std::string mpirun = "mpirun";       // elastic --mpirun CMD: the launcher and its own options
  std::vector<std::string> elastic_args;  // elastic -- train|resume ARGS: the command it runs
  std::string onnx_file;               // export --onnx FILE: the model as ONNX
  std::string safetensors_file;        // export --safetensors FILE: the variables as safetensors

  // The config named by --config with --set and --run-dir applied (UsageError on any problem). Also
  // applies what the config says about the process itself: the collective timeout (comm.timeout_s).
  // `plan` reads no data, so its data.path need not exist.
  Config load_config() const {
    Config config =
        dtrain::load_config(config_path, LoadOptions{overrides, run_dir, command != "plan", init_from, init_skip, profile});
    set_collective_timeout(config.comm.timeout_s);
    return config;
  }
};

int run_train(const CommandOptions& options);
int run_resume(const CommandOptions& options);
int run_eval(const CommandOptions& options);
int run_predict(const CommandOptions& options);
int run_inspect(const CommandOptions& options);
int run_plan(const CommandOptions& options);
int run_diff(const CommandOptions& options);
int run_elastic(const CommandOptions& options);
int run_export(const CommandOptions& options);
// plan --calibrate, --cluster and --compare (app/plan_time_command.cpp); false from wants_plan_time when
// none is given.
bool wants_plan_time(const CommandOptions& options);
int run_plan_time(const CommandOptions& options);

}  // namespace dtrain

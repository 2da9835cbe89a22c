// `dtrain plan`: a dry run. Shows the mesh, every variable's layout and the rule that chose it, local shard
// shapes and bytes per device, and the collectives of one training step, counted while running that step
// on zeros (so the figures are what the engine does, not an estimate). Reads no data (data.path need not
// exist): the example shape comes from the config (dataset, image_shape, max_tokens) and the class count
// from the dataset kind, which the model's last layer must match.
#include <algorithm>
#include <array>
#include <filesystem>
#include <map>

#include "app/commands.hpp"
#include "engine/data_source.hpp"
#include "engine/calibration.hpp"
#include "engine/cluster.hpp"
#include "engine/dry_step.hpp"
#include "engine/layout_search.hpp"
#include "engine/step_time.hpp"
#include "core/output_dir.hpp"
#include "engine/memory_plan.hpp"
#include "engine/model_builder.hpp"
#include "engine/model_graph.hpp"
#include "core/checkpoint/format.hpp"
#include "core/comm/counting.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/device.hpp"
#include "core/bytes_text.hpp"
#include "core/error.hpp"
#include "core/gpu_assignment.hpp"
#include "core/train/metrics_log.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "data/class_folders.hpp"
#include "data/split.hpp"

namespace dtrain {
namespace {

// "850 us", "12.3 ms", "1.42 s".
std::string seconds_text(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.0f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  return fmt::format("{:.3g} s", seconds);
}

// Plan's words for people; left out with --json, which prints one JSON object alone.
bool quiet = false;
template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  if (!quiet) fmt::print(format, std::forward<Args>(args)...);
}

// The mesh dims a group spans, found by comparing with Mesh::group for every subset of dims.
std::string group_dims(const Mesh& mesh, int rank, const std::vector<int>& ranks) {
  const int dims = mesh.num_dims();
  for (int subset = 0; subset < (1 << dims); ++subset) {
    std::vector<std::string> names;
    for (int d = 0; d < dims; ++d) {
      if (subset & (1 << d)) names.push_back(mesh.dim_names()[d]);
    }
    if (mesh.group(rank, names) == ranks) return fmt::format("[{}]", fmt::join(names, ", "));
  }
  return "[?]";
}

}  // namespace

namespace {

// data.validation_split, train.validation_every, train.early_stopping, train.reduce_lr_on_plateau and
// checkpoint.keep_best, when set.
void print_validation(const Config& config) {
  const DataConfig& data = config.data;
  if (!data.has_validation()) return;
  const std::string held_out =
      data.validation_fraction > 0
          ? fmt::format("the last {} of {} (Keras' validation_split)", data.validation_fraction, data.train_split)
          : fmt::format("{} (disjoint from {})", data.validation_split, data.train_split);
  const TrainConfig& train = config.train;
  say("validation: {}, evaluated {}\n", held_out,
             train.validation_every_steps > 0 ? fmt::format("every {} steps", train.validation_every_steps)
                                              : std::string("after every epoch"));
  if (const auto& stopping = train.early_stopping) {
    const std::string mode = stopping->mode != "auto" ? stopping->mode
                             : train::auto_mode(stopping->monitor) == train::MonitorMode::min ? "min"
                                                                                             : "max";
    say("early stopping: {} ({}), patience {} validation(s), min_delta {}{}\n", stopping->monitor, mode,
               stopping->patience, stopping->min_delta,
               stopping->restore_best_weights ? "; the best weights restored at the end (from DIR/best)" : "");
  }
  if (const auto& plateau = train.reduce_lr_on_plateau) {
    say("reduce lr on plateau: {} (mode {}), factor {}, patience {} validation(s), min_delta {}, cooldown {}, "
               "min_lr {} (multiplies the schedule's rate)\n",
               plateau->monitor, plateau->mode, plateau->factor, plateau->patience, plateau->min_delta, plateau->cooldown,
               plateau->min_lr);
  }
  if (!config.checkpoint.keep_best.empty()) {
    say("keep best: {} (a checkpoint at every validation; {}/{} names the best, kept beyond max_to_keep {})\n",
               config.checkpoint.keep_best, config.checkpoint.dir, checkpoint::kBestFile, config.checkpoint.max_to_keep);
  }
}

// The dataset kind, and for image folders how the files become inputs.
std::string dataset_text(const Config& config) {
  if (config.data.dataset != Dataset::image_folder) return to_string(config.data.dataset);
  return fmt::format("image_folder {}: {}x{} {}, resize {}", config.data.path, config.data.image_shape[0],
                     config.data.image_shape[1], config.data.image_shape[2] == 1 ? "grayscale" : "rgb",
                     config.data.resize);
}

}  // namespace

// plan --search: the config's own plan, then the fastest candidates as --set lines.
int print_search(const CommandOptions& options) {
  const Calibration calibration = current_calibration();
  const SearchResult result = search_layouts(options.config_path, options.overrides, options.processes, calibration);
  const auto line = [](const SearchCandidate& c) {
    return fmt::format("{:>10}  {:>9.0f} examples/s  peak {:>10} a process  mesh {}", seconds_text(c.step_seconds),
                       c.examples_per_second, bytes_text(c.peak_bytes_per_process), c.mesh);
  };
  fmt::print("the config as given: {}\n", line(result.config));
  fmt::print("searched {} plans ({} more refused by the engine: shapes the mesh does not divide); {}\n", result.evaluated,
             result.refused, calibration_line(calibration));
  fmt::print("the fastest that fit, predicted:\n");
  for (size_t i = 0; i < result.best.size(); ++i) {
    const SearchCandidate& c = result.best[i];
    fmt::print("{}. {}  ({:.2f}x the config's speed)\n", i + 1, line(c), result.config.step_seconds / c.step_seconds);
    for (const std::string& set : c.overrides) fmt::print("     --set \"{}\"\n", set);
  }
  if (result.best.empty()) fmt::print("  none fits this machine\n");
  return 0;
}

int run_plan(const CommandOptions& options) {
  if (options.search) return print_search(options);
  Config config = options.load_config();
  quiet = options.json;
  if (options.echo) say("{}\n", describe_config(config));
  Engine engine = build_engine(config, train_options(config), std::nullopt);  // checked below, after the table
  const BuiltModel& built = engine.built;
  // A class folder data set (text_folder, image_folder) without data.classes has as many classes as its
  // training split has subfolders: listed (no file is read) when data.path is there; else the model's output
  // is not checked, and the plan says so. Arrays and CSV files without data.classes: their labels tell.
  int classes = classes_of(config);
  std::string classes_note;
  if (classes == 0 && !has_split_folders(config.data.dataset)) {
    classes_note = ": the training labels tell, and plan reads none";
  } else if (classes == 0) {
    const std::string folder = (std::filesystem::path(config.data.path) / data::split_name(config.data.train_split)).string();
    if (std::filesystem::is_directory(folder)) {
      classes = int(data::class_folder_names(folder, "[" + to_string(config.data.dataset) + "]").size());
      classes_note = fmt::format(", the subfolders of {}", folder);
    } else {
      classes_note = fmt::format(": {} is not there to list, so the model's output is not checked", folder);
    }
  }
  if (classes > 0) check_output_classes(config, *built.model, classes);
  const MeshPtr& mesh = engine.mesh;
  const Shape& example = engine.example;
  train::Trainer& trainer = *engine.trainer;
  Shape input_shape{config.data.batch_size};
  input_shape.insert(input_shape.end(), example.begin(), example.end());
  const Layout input = trainer.input_layout(int(input_shape.size()));

  // A cluster file: its devices' memory and links (the mesh size was checked against it already).
  std::optional<Cluster> cluster;
  const Calibration calibration = current_calibration();
  if (!options.cluster_file.empty()) cluster = load_cluster(options.cluster_file, calibration);
  // Which process holds which devices: this run's, or those of `mpirun -np P` when --processes P says so.
  Placement placement = engine.placement;
  if (options.processes > 0) {
    try {
      placement = placement_of(mesh->size(), options.processes, 0);
    } catch (const UsageError& error) {
      throw UsageError(fmt::format("plan --processes {}: {}", options.processes, error.what()));
    }
  }
  say("mesh: {} ({} devices, {})\n", mesh->to_string(), mesh->size(), to_string(config.mesh.devices));
  say("processes: {} ({})\n", placement.processes, placement.describe());
  if (config.train.precision == Precision::bf16)
    say("precision: bf16 (Keras' mixed_bfloat16): layers compute from bf16-rounded values held as float32, so every "
        "tensor below is counted at 4 bytes a value, the rounded copies included\n");
  say("input x: global {} layout {} -> local {} per device; {} classes ({}{})\n", shape_string(input_shape),
             input.specs_string(), shape_string(input.local_shape(input_shape)),
             classes > 0 ? std::to_string(classes) : "unknown", dataset_text(config), classes_note);
  if (config.train.accumulation_steps > 1) {
    Shape micro_shape = input_shape;
    micro_shape[0] = config.data.batch_size / config.train.accumulation_steps;
    say("accumulation: {} micro-batches of {} examples a step (activations of one micro-batch): local {} "
               "per device a micro-batch\n",
               config.train.accumulation_steps, micro_shape[0], shape_string(input.local_shape(micro_shape)));
  }
  if (config.train.clip.global_norm > 0)
    say("clip: global norm {} (one all-reduce of the sum of squares a step)\n", config.train.clip.global_norm);
  if (config.train.clip.value > 0) say("clip: each gradient value to [-{0}, {0}]\n", config.train.clip.value);
  if (!config.train.init_from.empty())  // plan reads no checkpoint: `train` matches the variables
    say("init_from: {} (variables read at the start of `train`{})\n", config.train.init_from,
               config.train.init_skip.empty() ? ""
                                              : fmt::format("; left as initialized: {}", fmt::join(config.train.init_skip, ", ")));
  print_validation(config);
  // The config's own shape walk (the one load_config checked).
  const std::vector<Shape> shapes = model_shapes(config);
  const ModelGraph graph = model_graph(config);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const LayerConfig& layer = graph.layers[i].layer;
    // A graph's joints: the inputs of a layer that does not simply take the one before.
    const bool stacked = layer.inputs.size() == 1 && i > 0 && layer.inputs[0] == graph.layers[i - 1].layer.name;
    say("{} {:<20} {:<20} output {}{}\n", i == 0 ? "layers:" : "       ", layer.name, to_string(layer.kind),
               shape_string(shapes[i]), layer.inputs.empty() || stacked ? "" : fmt::format(" <- {}", fmt::join(layer.inputs, ", ")));
  }
  if (!config.outputs.empty()) say("        output: {}\n", graph.output);
  say("\n");
  // One step of the engine run dry (engine/dry_step.hpp): every device's tensors and kernels, every rank's
  // collectives, nothing allocated.
  const DryStep step = dry_step(config);
  const MemoryPlan memory = memory_plan(config, *built.model, placement, MemoryUse::train, &step);
  // One row per variable; every column as wide as its longest entry (paths like
  // attention/attention_output/kernel, rules, layouts of rank 3).
  std::vector<std::array<std::string, 7>> rows{{"variable", "global shape", "layout", "chosen by", "local shape",
                                               "per device", "update per device (and slots)"}};
  for (const VariableMemory& row : memory.variables) {
    const nn::VariableInfo& info = *row.info;
    const std::string update =
        !info.trainable ? "-"
        : row.sharding.sharded()
            ? fmt::format("flat 1/{} over [{}]: {} of {} values", row.sharding.group_size,
                          fmt::join(row.sharding.dims, ", "), row.share, row.sharding.local_size)
            : fmt::format("whole: {} values", row.sharding.local_size);
    rows.push_back({info.path, shape_string(info.shape), info.choice.layout.specs_string(), info.choice.reason,
                    shape_string(row.local), bytes_text(row.bytes), update});
  }
  std::array<size_t, 7> widths{};
  for (const auto& row : rows)
    for (size_t column = 0; column < row.size(); ++column) widths[column] = std::max(widths[column], row[column].size());
  for (const auto& row : rows)
    say("{:<{}} {:<{}} {:<{}} {:<{}} {:<{}} {:>{}}  {}\n", row[0], widths[0], row[1], widths[1], row[2], widths[2],
        row[3], widths[3], row[4], widths[4], row[5], widths[5], row[6]);
  // Compared with this machine's memory per process (each visible GPU's free memory on a GPU mesh), or with a
  // cluster's per device.
  const int64_t available = available_memory_bytes();
  const double device_memory = cluster ? cluster->memory_bytes_per_device : 0;
  const bool per_device = device_memory > 0;
  const bool on_gpus = !cluster && config.mesh.devices == DeviceKind::gpu;
  const std::vector<GpuShare> gpus = on_gpus ? gpu_shares(memory.devices_per_process) : std::vector<GpuShare>{};
  const bool gpus_fit = std::all_of(gpus.begin(), gpus.end(),
                                    [&](const GpuShare& share) { return share.need(memory) <= double(share.free_bytes); });
  const double have = per_device ? device_memory : double(available);
  const double need = per_device ? memory.per_device() : memory.process_peak();
  const bool checked = per_device || (!cluster && !on_gpus && available > 0);
  const bool fits = on_gpus ? gpus_fit : !checked || need <= have;
  const std::string verdict = on_gpus ? "not compared (GPU devices: their tensors live in GPU memory)"
                              : !checked || need <= have ? "fits"
                                                         : fmt::format("does not fit, {} short", bytes_text(need - have));
  say("\nmemory of one training step, run dry (every tensor the engine's step holds, none allocated):\n");
  say("  per device at the step's peak: {} ({}); {} parameters in all{}\n", bytes_text(memory.per_device()),
      memory.items(), built.model->num_parameters(),
      per_device ? fmt::format("; a device has {}: {}", bytes_text(device_memory), verdict) : "");
  say("  per process ({} device{}{}): {}\n", memory.devices_per_process, memory.devices_per_process == 1 ? "" : "s",
      memory.host_bytes > 0 ? fmt::format(", and {} of batches read on the host", bytes_text(memory.host_bytes)) : "",
      bytes_text(memory.per_process()));
  if (memory.process_peak_bytes > 0) {
    std::string items;
    for (const MemoryItem& item : memory.process_items)
      if (item.bytes > 0 && item.name != "device tensors") items += fmt::format("{}{} {}", items.empty() ? "" : ", ", item.name, bytes_text(item.bytes));
    say("  the rest of the process (engine/process_memory.hpp): {}\n", items);
  } else {
    say("  the rest of the process (runtime, data set) is not counted: {} is not there to size\n", config.data.path);
  }
  if (!per_device && !cluster)
    say("  peak per process, predicted: {}; this machine has {} available: {}\n", bytes_text(memory.process_peak()),
        bytes_text(double(available)), verdict);
  for (const GpuShare& share : gpus) {
    const double short_of = share.need(memory) - double(share.free_bytes);
    say("  on cuda:{} ({} device{} of this process): {}; it has {} free: {}\n", share.gpu, share.devices,
        share.devices == 1 ? "" : "s", bytes_text(share.need(memory)), bytes_text(double(share.free_bytes)),
        short_of <= 0 ? "fits" : fmt::format("does not fit, {} short", bytes_text(short_of)));
  }

  // The step's time: the first device of this process's kernels and collectives, at this machine's rates
  // (or the cluster's), engine/step_time.hpp.
  const dry_run::DeviceTally& first = step.tally.devices[size_t(placement.first)];
  const StepTime time = cluster ? predict_step(first.kernels, step.collectives[size_t(placement.first)],
                                               cluster->placement(), calibration, cluster->links)
                                : predict_on_this_machine(step, placement, engine.devices, calibration);
  double flops = 0;
  for (const kernels::KernelWork& work : first.kernels) flops += work.flops;
  std::string communication;
  for (int level = 0; level < kLinkLevels; ++level)
    if (time.communication_s[size_t(level)] > 0)
      communication += fmt::format(", {} {}", link_level_name(LinkLevel(level)), seconds_text(time.communication_s[size_t(level)]));
  say("\ntime of one training step, predicted: {} ({:.0f} examples/s); compute {} ({:.3g} GFLOP a device, {} kernel "
      "calls){}; {}\n",
      seconds_text(time.step_s), time.examples_per_s(config.data.batch_size), seconds_text(time.compute_s), flops / 1e9,
      first.kernels.size(), communication.empty() ? "" : "; communication" + communication.substr(1),
      cluster ? "the cluster's rates" : calibration_line(calibration));

  // The collectives of this process's first device.
  const std::vector<CollectiveCall>& calls = step.collectives[size_t(placement.first)];
  struct Total {
    int calls = 0;
    size_t bytes = 0;
  };
  std::map<std::pair<std::string, std::string>, Total> totals;
  size_t all_bytes = 0;
  for (const auto& call : calls) {
    std::string over = group_dims(*mesh, placement.first, call.ranks);
    if (placement.process_of(call.ranks.front()) != placement.process_of(call.ranks.back()))
      over += " (across processes)";
    Total& total = totals[{call.kind, over}];
    ++total.calls;
    total.bytes += call.bytes;
    all_bytes += call.bytes;
  }
  say("\ncollectives of one training step (forward, backward, update, metrics), per device:\n");
  if (totals.empty()) say("  none: every device computes alone\n");
  for (const auto& [key, total] : totals) {
    say("  {:<15} over {:<40} {:>4} calls  {:>12}\n", key.first, key.second, total.calls, bytes_text(double(total.bytes)));
  }
  if (!totals.empty()) say("  {:<15}      {:<40} {:>4}        {:>12}\n", "total", "", calls.size(), bytes_text(double(all_bytes)));
  if (options.json) {
    std::string items;  // the process's items by name (the device tensors among them)
    for (const MemoryItem& item : memory.process_items)
      items += fmt::format("{}{}: {:.0f}", items.empty() ? "" : ", ", train::json_string(item.name), item.bytes);
    std::string collectives;
    for (const auto& call : calls)
      collectives += fmt::format("{}{{\"kind\": {}, \"ranks\": [{}], \"bytes\": {}, \"across_processes\": {}}}",
                                 collectives.empty() ? "" : ", ", train::json_string(call.kind), fmt::join(call.ranks, ", "),
                                 call.bytes, placement.process_of(call.ranks.front()) != placement.process_of(call.ranks.back()));
    fmt::print("{{\"config\": {}, \"mesh\": {}, \"devices\": {}, \"processes\": {}, \"devices_per_process\": {}, "
               "\"fits\": {}, \"available_bytes\": {}, \"peak_bytes_per_process\": {:.0f}, \"peak_bytes_per_device\": {:.0f}, "
               "\"variable_bytes_per_device\": {:.0f}, \"slot_bytes_per_device\": {:.0f}, \"parameters\": {}, "
               "\"step_seconds\": {:.6g}, \"compute_seconds\": {:.6g}, \"examples_per_second\": {:.6g}, "
               "\"flops_per_device\": {:.6g}, \"calibrated\": {}, \"precision\": {}, "
               "\"collective_bytes_per_device\": {}, \"items\": {{{}}}, \"collectives\": [{}]}}\n",
               train::json_string(options.config_path), train::json_string(mesh->to_string()), mesh->size(),
               placement.processes, placement.local, fits, available, memory.process_peak(), memory.per_device(),
               memory.variable_bytes, memory.slot_bytes, built.model->num_parameters(), time.step_s, time.compute_s,
               time.examples_per_s(config.data.batch_size), flops, calibration.calibrated,
               train::json_string(to_string(config.train.precision)), all_bytes, items, collectives);
  }
  // Exit 2, naming the bytes (a GPU mesh: against the free memory read above).
  if (!fits && on_gpus) check_gpu_memory(config, memory, gpus);
  if (!fits && !per_device) check_memory(config, memory);
  if (!fits && per_device)
    throw_config_error(config.where("mesh"), fmt::format("the run needs {} a device at the step's peak; a device of {} "
                                                         "has {}, {} short",
                                                         bytes_text(need), path_text(options.cluster_file),
                                                         bytes_text(have), bytes_text(need - have)));
  return 0;
}

}  // namespace dtrain

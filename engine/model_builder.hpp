// engine/ turns a validated Config into running parts, for every command alike: the model and its layouts
// (model_builder), the data sources per rank (data_source, array_source), the checkpoint dir and the hooks that
// save and restore (checkpoint_dir, checkpoint_hooks), fine-tuning's initial variables (init_from) and what a run
// writes besides checkpoints (run_outputs). It knows the config's structs, never YAML or the command line.
//
// From a validated Config to the engine's objects: the mesh, the model graph with every variable's
// layout chosen by the config's layout rules, and the input layout's specs. Problems that need the
// model's shapes (rank mismatch, indivisible dims) are UsageErrors at the rule's file:line:col.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "engine/dry_step.hpp"
#include "engine/memory_plan.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/nn/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/train/trainer.hpp"

namespace dtrain {

// The nn layer a layer's config describes.
std::unique_ptr<nn::Layer> make_layer(const LayerConfig& layer);

// The config's mesh. devices: gpu where this build has no CUDA or no GPU is visible: a config error at
// mesh.devices.
MeshPtr build_mesh(const Config& config);

struct BuiltModel {
  std::unique_ptr<nn::Model> model;
};
// example_shape: one example without the batch axis ({784}, {28, 28}, {vocabulary}).
BuiltModel build_model(const Config& config, const MeshPtr& mesh, const Shape& example_shape);

std::vector<std::string> input_specs(const Config& config);
// data.validation_split's schedule, train.early_stopping and checkpoint.keep_best as the trainer takes them.
train::ValidationOptions validation_options(const Config& config);
train::TrainOptions train_options(const Config& config);
// The optimizer `config` describes, with its learning-rate schedule.
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerConfig& config);

// What every command builds from a config before it reads any data: the mesh, the model with its
// layouts (a layout rule that matches no variable refused at the rule), and a trainer whose input layout and batch divisibility are checked (at
// data.layout). build_model refuses variables or input batches too large to allocate (at their layer, or
// at data.batch_size / max_tokens), naming the bytes they need.
struct Engine {
  MeshPtr mesh;
  Placement placement;  // which process holds which devices (one process unless under mpirun)
  Place::Kind devices = Place::Kind::Cpu;  // mesh.devices
  Shape example;  // one example without the batch axis
  BuiltModel built;
  std::unique_ptr<train::Trainer> trainer;
  // The memory check's count, with the dry step it ran (absent when build_engine was asked not to check, or
  // the dry step failed): what the run's "run" row records as plan's predictions.
  std::optional<MemoryPlan> memory;
  std::shared_ptr<const DryStep> dry;
};
// `memory`: what the run holds, checked against the memory there is before anything is allocated
// (engine/memory_plan.hpp); nullopt: not checked (plan prints the count first, then checks).
Engine build_engine(const Config& config, train::TrainOptions options, std::optional<MemoryUse> memory = MemoryUse::train);

// "0 on cuda:0, 1 on cuda:0": the GPU of each of this process's devices (core/gpu_assignment.hpp).
std::string gpu_line(const Placement& placement);

// Where a variable ("dense1/kernel") comes from in the config: its layer's size key (dense, conv2d, embedding)
// or its layer, else the model section.
Where variable_where(const Config& config, const std::string& variable_path);

// The model's output layer must have one unit per class of the data set (a config error otherwise).
void check_output_classes(const Config& config, const nn::Model& model, int classes);

}  // namespace dtrain

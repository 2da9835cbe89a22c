#include "engine/model_builder.hpp"
#include "engine/dry_step.hpp"
#include "engine/memory_plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/comm/mpi/mpi.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/gpu_assignment.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/nn/layers.hpp"
#include "core/profile/trace.hpp"
#include "engine/model_graph.hpp"

namespace dtrain {
namespace {

Initializer to_initializer(const InitializerConfig& config) {
  Initializer init;
  init.seed0 = config.seed[0];
  init.seed1 = config.seed[1];
  switch (config.kind) {
    case InitKind::zeros: init.kind = Initializer::Kind::Zeros; break;
    case InitKind::ones: init.kind = Initializer::Kind::Ones; break;
    case InitKind::normal:
      init.kind = Initializer::Kind::Normal;
      init.mean = float(config.mean);
      init.stddev = float(config.stddev);
      break;
    case InitKind::uniform:
      init.kind = Initializer::Kind::Uniform;
      init.low = float(config.minval);
      init.high = float(config.maxval);
      break;
    case InitKind::glorot_uniform: init.kind = Initializer::Kind::GlorotUniform; break;
  }
  return init;
}

nn::Activation to_activation(Activation activation) {
  switch (activation) {
    case Activation::relu: return nn::Activation::Relu;
    case Activation::softmax: return nn::Activation::Softmax;
    case Activation::sigmoid: return nn::Activation::Sigmoid;
    case Activation::tanh: return nn::Activation::Tanh;
    case Activation::gelu: return nn::Activation::Gelu;
    case Activation::none: return nn::Activation::None;
  }
  return nn::Activation::None;
}

ops::Padding to_padding(PaddingKind padding) {
  return padding == PaddingKind::same ? ops::Padding::Same : ops::Padding::Valid;
}


// The elements of `shape` times `bytes_per_element`, or nullopt when that overflows int64.
std::optional<int64_t> checked_bytes(const Shape& shape, int64_t bytes_per_element) {
  int64_t total = bytes_per_element;
  for (int64_t extent : shape) {
    if (extent < 0 || (extent > 0 && total > std::numeric_limits<int64_t>::max() / extent)) return std::nullopt;
    total *= extent;
  }
  return total;
}

std::string bytes_needed(const std::optional<int64_t>& bytes) {
  return bytes ? fmt::format("{} bytes", *bytes) : std::string("more than 2^63 bytes");
}

// Sizes that could never be allocated (a dense layer of 10^9 units, a huge max_tokens) are config errors
// here, before anything is allocated, naming what was too large and the bytes it needs, instead of a
// std::bad_alloc (or an overflowed size) later.
void check_sizes(const Config& config, const nn::Model& model, const Shape& input_shape, int devices_here) {
  const int64_t memory = available_memory_bytes();
  auto too_large = [&](const std::optional<int64_t>& bytes) { return !bytes || (memory > 0 && *bytes > memory); };
  const Where input_where = config.where(is_text(config.data.dataset) ? "data.vectorizer.max_tokens" : "data.batch_size");
  const std::optional<int64_t> input_bytes = checked_bytes(input_shape, sizeof(float));
  if (too_large(input_bytes)) {
    throw_config_error(input_where, fmt::format("the input batch {} is too large: it needs {} (this machine has {} bytes available)",
                                                shape_string(input_shape), bytes_needed(input_bytes), memory));
  }
  std::optional<int64_t> total = 0;
  for (const auto& info : model.variables()) {
    const Shape local = info.choice.layout.local_shape(info.shape);
    const std::optional<int64_t> bytes = checked_bytes(local, sizeof(float));
    const Where where = variable_where(config, info.path);
    const std::optional<int64_t> here = bytes ? checked_bytes({*bytes}, devices_here) : std::nullopt;
    if (too_large(bytes) || too_large(here)) {
      throw_config_error(where, fmt::format("variable {} of shape {} is too large: it needs {} per device{} (this "
                                            "machine has {} bytes)",
                                            info.path, shape_string(info.shape), bytes_needed(bytes),
                                            devices_here > 1 ? fmt::format(", {} for this process's {} devices",
                                                                           bytes_needed(here), devices_here)
                                                             : "",
                                            memory));
    }
    total = total && here && *here <= std::numeric_limits<int64_t>::max() - *total ? std::optional<int64_t>(*total + *here)
                                                                           : std::nullopt;
  }
  if (too_large(total)) {
    throw_config_error(config.where("model"),
                       fmt::format("the model's variables need {} on this process's {} device(s) (this machine has {} bytes available)",
                                   bytes_needed(total), devices_here, memory));
  }
}

}  // namespace

Where variable_where(const Config& config, const std::string& variable_path) {
  const std::string layer = variable_path.substr(0, variable_path.rfind('/'));
  Where where = config.where("model");
  for (const GraphLayer& g : model_graph(config).layers) {
    const LayerKind kind = g.layer.kind;
    const bool sized = kind == LayerKind::dense || kind == LayerKind::conv2d || kind == LayerKind::embedding;
    if (g.layer.name == layer) where = config.where(sized ? fmt::format("{}.{}", g.at, to_string(kind)) : g.at);
  }
  return where;
}

std::unique_ptr<nn::Layer> make_layer(const LayerConfig& layer) {
  switch (layer.kind) {
    case LayerKind::dense:
      return std::make_unique<nn::Dense>(layer.name, layer.dense.units, to_activation(layer.dense.activation),
                                         layer.dense.use_bias, to_initializer(layer.dense.kernel_init),
                                         to_initializer(layer.dense.bias_init));
    case LayerKind::batch_norm: {
      nn::BatchNorm::Options options;
      const BatchNormConfig& bn = layer.batch_norm;
      options.center = !bn.parameter_free && bn.center;
      options.scale = !bn.parameter_free && bn.scale;
      options.moving_statistics = !bn.parameter_free;
      options.momentum = float(bn.momentum);
      options.epsilon = float(bn.epsilon);
      return std::make_unique<nn::BatchNorm>(layer.name, options);
    }
    case LayerKind::dropout:
      return std::make_unique<nn::Dropout>(layer.name, float(layer.dropout.rate),
                                           seed_key(layer.dropout.seed[0], layer.dropout.seed[1]));
    case LayerKind::flatten: return std::make_unique<nn::Flatten>(layer.name);
    case LayerKind::relu: return std::make_unique<nn::ActivationLayer>(layer.name, nn::Activation::Relu);
    case LayerKind::softmax: return std::make_unique<nn::ActivationLayer>(layer.name, nn::Activation::Softmax);
    case LayerKind::sigmoid: return std::make_unique<nn::ActivationLayer>(layer.name, nn::Activation::Sigmoid);
    case LayerKind::tanh: return std::make_unique<nn::ActivationLayer>(layer.name, nn::Activation::Tanh);
    case LayerKind::gelu: return std::make_unique<nn::ActivationLayer>(layer.name, nn::Activation::Gelu);
    case LayerKind::conv2d: {
      const Conv2dConfig& conv = layer.conv2d;
      nn::Conv2D::Options options;
      options.filters = conv.filters;
      options.kernel_h = conv.kernel_size[0];
      options.kernel_w = conv.kernel_size[1];
      options.stride_h = conv.strides[0];
      options.stride_w = conv.strides[1];
      options.padding = to_padding(conv.padding);
      options.activation = to_activation(conv.activation);
      options.use_bias = conv.use_bias;
      options.kernel_init = to_initializer(conv.kernel_init);
      options.bias_init = to_initializer(conv.bias_init);
      return std::make_unique<nn::Conv2D>(layer.name, options);
    }
    case LayerKind::max_pool2d:
    case LayerKind::avg_pool2d: {
      const Pool2dConfig& pool = layer.pool2d;
      nn::Pool2D::Options options;
      options.kind = layer.kind == LayerKind::max_pool2d ? nn::Pool2D::Kind::Max : nn::Pool2D::Kind::Average;
      options.pool_h = pool.pool_size[0];
      options.pool_w = pool.pool_size[1];
      options.stride_h = pool.strides[0];
      options.stride_w = pool.strides[1];
      options.padding = to_padding(pool.padding);
      return std::make_unique<nn::Pool2D>(layer.name, options);
    }
    case LayerKind::global_average_pool: return std::make_unique<nn::GlobalAveragePool>(layer.name);
    case LayerKind::embedding:
      return std::make_unique<nn::Embedding>(layer.name, layer.embedding.input_dim, layer.embedding.output_dim,
                                             to_initializer(layer.embedding.init), layer.embedding.mask_zero);
    case LayerKind::multi_head_attention: {
      const AttentionConfig& attention = layer.attention;
      nn::MultiHeadAttention::Options options;
      options.num_heads = attention.num_heads;
      options.key_dim = attention.key_dim;
      options.value_dim = attention.value_dim;
      options.output_dim = attention.output_shape;
      options.dropout = float(attention.dropout);
      options.seed = seed_key(attention.seed[0], attention.seed[1]);
      options.use_bias = attention.use_bias;
      options.causal = attention.causal;
      options.kernel_init = to_initializer(attention.kernel_init);
      options.bias_init = to_initializer(attention.bias_init);
      return std::make_unique<nn::MultiHeadAttention>(layer.name, options);
    }
    case LayerKind::position_embedding:
      return std::make_unique<nn::PositionEmbedding>(layer.name, to_initializer(layer.position_embedding.init));
    case LayerKind::layer_norm:
      return std::make_unique<nn::LayerNorm>(layer.name, float(layer.layer_norm.epsilon), layer.layer_norm.center,
                                             layer.layer_norm.scale);
    case LayerKind::relayout: return std::make_unique<nn::Relayout>(layer.name, layer.relayout.specs);
    case LayerKind::add: return std::make_unique<nn::Merge>(layer.name, nn::Merge::Kind::Add);
    case LayerKind::subtract: return std::make_unique<nn::Merge>(layer.name, nn::Merge::Kind::Subtract);
    case LayerKind::multiply: return std::make_unique<nn::Merge>(layer.name, nn::Merge::Kind::Multiply);
    case LayerKind::average: return std::make_unique<nn::Merge>(layer.name, nn::Merge::Kind::Average);
    case LayerKind::concatenate:
      return std::make_unique<nn::Merge>(layer.name, nn::Merge::Kind::Concatenate, layer.concatenate.axis);
    case LayerKind::block: throw Error("[model] a block use is not a layer: model_graph() expands it");
  }
  throw Error("[model] unknown layer kind");
}

MeshPtr build_mesh(const Config& config) {
  if (config.mesh.devices == DeviceKind::gpu) {
    const std::string why = devices_unavailable(Place::Kind::Cuda);
    if (!why.empty()) throw_config_error(config.where("mesh.devices"), why + "; use devices: cpu");
  }
  try {
    return make_mesh(config.mesh.dim_names(), config.mesh.dim_sizes());
  } catch (const UsageError& e) {
    throw_config_error(config.where("mesh"), e.what());
  }
}

BuiltModel build_model(const Config& config, const MeshPtr& mesh, const Shape& example_shape) {
  const ModelGraph graph = model_graph(config);
  BuiltModel built{make_model(config, graph)};
  std::vector<nn::LayoutRule> rules;
  for (size_t i = 0; i < config.layouts.size(); ++i)
    rules.push_back({config.layouts[i].pattern, config.layouts[i].specs, config.where(fmt::format("layouts[{}]", i)).str()});
  nn::LayoutMap layouts(rules);
  Shape input_shape{config.data.batch_size};
  input_shape.insert(input_shape.end(), example_shape.begin(), example_shape.end());
  try {
    built.model->build(input_shape, layouts, mesh);
  } catch (const UsageError& e) {
    // Layout rule errors carry their own location; others point at the model section.
    const std::string text = e.what();
    if (text.rfind(config.file, 0) == 0) throw;
    throw_config_error(config.where("model"), text);
  }
  const int processes = std::max(1, process_count());
  check_sizes(config, *built.model, input_shape, std::max(1, mesh->size() / processes));
  // A rule that matches nothing is always a mistake (a typo, a renamed layer): the run would train with that
  // variable replicated. Refused at the rule, with the closest variable path.
  for (const auto& rule : layouts.unused_rules()) {
    std::vector<std::string> paths;
    for (const auto& variable : built.model->variables()) paths.push_back(variable.path);
    const std::string hint = did_you_mean(rule.pattern, paths);
    throw UsageError(fmt::format("{}{}layouts: rule '{}' matches no variable of the model{}", rule.where,
                                 rule.where.empty() ? "" : ": ", rule.pattern,
                                 hint.empty() ? fmt::format(" (its variables: {})", fmt::join(paths, ", ")) : hint));
  }
  return built;
}

Engine build_engine(const Config& config, train::TrainOptions options, std::optional<MemoryUse> memory) {
  Engine engine;
  engine.mesh = build_mesh(config);
  engine.devices = options.devices;
  try {
    // A dry or timed step in this process (options.in_process: plan, the memory check, calibration) holds every
    // rank of the mesh whatever mpirun started: under `mpirun -np 2` calibration's one-device model was refused.
    engine.placement = options.in_process ? placement_of(engine.mesh->size(), 1, 0) : placement_of(engine.mesh->size());
  } catch (const UsageError& error) {
    throw_config_error(config.where("mesh"), error.what());
  }
  engine.example = config.data.example_shape();
  engine.built = build_model(config, engine.mesh, engine.example);
  if (memory) {  // the engine's own step run dry first: nothing is allocated for a config that cannot fit
    try {
      engine.dry = std::make_shared<const DryStep>(dry_step(config, *memory));
    } catch (const std::exception&) {
      // A step that fails fails the run too, which says why at its place (a loss that does not suit the model is
      // named after this check); the layouts' count stands in for the step's peaks meanwhile.
    }
    engine.memory = memory_plan(config, *engine.built.model, engine.placement, *memory, engine.dry.get());
    check_memory(config, *engine.memory);
  }
  engine.trainer = std::make_unique<train::Trainer>(*engine.built.model, engine.mesh, input_specs(config), std::move(options));
  try {
    engine.trainer->input_layout(int(engine.example.size()) + 1);
  } catch (const UsageError& error) {
    throw_config_error(config.where("data.layout"), error.what());
  }
  return engine;
}

void check_output_classes(const Config& config, const nn::Model& model, int classes) {
  Shape input{config.data.batch_size};
  for (int64_t extent : config.data.example_shape()) input.push_back(extent);
  const Shape output = model.output_shape(input);
  if (config.train.loss.kind == LossKind::binary_crossentropy) {
    // Keras' from_logits=False: the output is the probability of class 1, which a sigmoid makes.
    const ModelGraph graph = model_graph(config);
    const LayerConfig& last = graph.layer(graph.output).layer;
    const bool sigmoid = last.kind == LayerKind::sigmoid ||
                         (last.kind == LayerKind::dense && last.dense.activation == Activation::sigmoid);
    if (output.size() != 2 || output.back() != 1 || !sigmoid)
      throw_config_error(config.where("train.loss"),
                         fmt::format("binary_crossentropy takes the probability of class 1: the model must end in a "
                                     "1-unit sigmoid (e.g. {{dense: 1, activation: sigmoid}}), but its output is {}{}",
                                     shape_string(output), sigmoid ? "" : " and not a sigmoid's"));
    if (classes != 2)
      throw_config_error(config.where("train.loss"),
                         fmt::format("binary_crossentropy needs labels 0 and 1 (two classes), but {} has {} classes",
                                     to_string(config.data.dataset), classes));
    return;
  }
  if (output.back() != classes) {
    throw_config_error(config.where("model"), fmt::format("the model ends in {} units but {} has {} classes",
                                                          output.back(), to_string(config.data.dataset), classes));
  }
}


std::vector<std::string> input_specs(const Config& config) {
  if (config.data.layout_given) return config.data.layout;
  return {config.mesh.dims.empty() ? kUnsharded : config.mesh.dims.front().name};
}

std::string gpu_line(const Placement& placement) {
  const std::vector<int> gpus = gpus_for_ranks(placement.local, kernels::cuda_device_count(), process_on_node());
  std::vector<std::string> parts;
  for (size_t i = 0; i < gpus.size(); ++i) parts.push_back(fmt::format("{} on cuda:{}", placement.first + int(i), gpus[i]));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerConfig& config) {
  std::unique_ptr<optim::Optimizer> optimizer;
  if (config.kind == OptimizerKind::sgd) {
    optimizer = optim::make_sgd(optim::SgdOptions{float(config.learning_rate), float(config.momentum), config.nesterov,
                                                  float(config.weight_decay)});
  } else {
    const optim::AdamOptions adam{float(config.learning_rate), float(config.beta_1), float(config.beta_2),
                                  float(config.epsilon), float(config.weight_decay)};
    optimizer = config.kind == OptimizerKind::adam ? optim::make_adam(adam) : optim::make_adamw(adam);
  }
  optimizer->set_schedule(config.schedule);
  return optimizer;
}

train::ValidationOptions validation_options(const Config& config) {
  train::ValidationOptions options;
  options.every_steps = config.train.validation_every_steps;
  if (const auto& stopping = config.train.early_stopping) {
    train::Monitor monitor{stopping->monitor, train::auto_mode(stopping->monitor), stopping->min_delta};
    if (stopping->mode != "auto") monitor.mode = stopping->mode == "min" ? train::MonitorMode::min : train::MonitorMode::max;
    options.early_stopping = train::EarlyStoppingOptions{monitor, stopping->patience};
  }
  if (!config.checkpoint.keep_best.empty())
    options.keep_best = train::Monitor{config.checkpoint.keep_best, train::auto_mode(config.checkpoint.keep_best), 0};
  // restore_best_weights reads DIR/best: keep_best (of the same metric, load_config checks) then keeps early
  // stopping's best, by its mode and min_delta, as Keras' best_weights.
  if (config.train.early_stopping && config.train.early_stopping->restore_best_weights) {
    options.restore_best_weights = true;
    options.keep_best = options.early_stopping->monitor;
  }
  if (const auto& plateau = config.train.reduce_lr_on_plateau) {
    train::Monitor monitor{plateau->monitor, train::auto_mode(plateau->monitor), plateau->min_delta};
    if (plateau->mode != "auto") monitor.mode = plateau->mode == "min" ? train::MonitorMode::min : train::MonitorMode::max;
    options.reduce_lr = train::ReduceLrOptions{monitor, plateau->factor, plateau->patience, plateau->cooldown, plateau->min_lr};
  }
  return options;
}

train::TrainOptions train_options(const Config& config) {
  train::TrainOptions options;
  options.devices = config.mesh.devices == DeviceKind::gpu ? Place::Kind::Cuda : Place::Kind::Cpu;
  options.epochs = config.train.epochs;
  options.max_steps = config.train.max_steps.value_or(-1);
  options.batch_size = config.data.batch_size;
  options.reduction = config.train.loss.reduction == Reduction::sum ? train::Reduction::Sum : train::Reduction::Mean;
  options.loss = config.train.loss.kind == LossKind::binary_crossentropy ? train::Loss::BinaryCrossentropy
                                                                         : train::Loss::SparseSoftmaxCrossEntropy;
  options.eval_every_epoch = config.train.eval_every_epoch;
  options.clip = {float(config.train.clip.global_norm), float(config.train.clip.value)};
  options.accumulation_steps = config.train.accumulation_steps;
  options.bitwise = config.train.bitwise;
  options.bf16 = config.train.precision == Precision::bf16;
  options.validation = validation_options(config);
  options.prefetch = config.data.prefetch;
  if (config.train.profile) {
    options.profile = {config.train.profile->start_step, config.train.profile->steps,
                       profile::trace_file(config.run_dir + "/trace", process_index())};
  }
  const OptimizerConfig optimizer = config.train.optimizer;
  options.make_optimizer = [optimizer] { return make_optimizer(optimizer); };
  return options;
}

}  // namespace dtrain

#include "engine/model_graph.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "engine/model_builder.hpp"

namespace dtrain {
namespace {

// A block's layers get seeds of their own in each use (else every use would start from the same values and
// drop the same units): the seed's second word is salted with the use's name. A stack's seeds stay as read.
void salt_seeds(LayerConfig& layer, const std::string& use) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : use) hash = (hash ^ c) * 1099511628211ull;
  const std::int64_t salt = std::int64_t(hash >> 24) << 4;  // low bits keep the slot (kernel 0, bias 1, dropout 2)
  for (auto* seed : {&layer.dense.kernel_init.seed, &layer.dense.bias_init.seed, &layer.conv2d.kernel_init.seed,
                     &layer.conv2d.bias_init.seed, &layer.embedding.init.seed, &layer.dropout.seed,
                     &layer.attention.kernel_init.seed, &layer.attention.bias_init.seed, &layer.attention.seed,
                     &layer.position_embedding.init.seed})
    (*seed)[1] += salt;
}

}  // namespace

const GraphLayer& ModelGraph::layer(const std::string& name) const {
  for (const GraphLayer& g : layers)
    if (g.layer.name == name) return g;
  throw Error(fmt::format("[model] no layer '{}'", name));
}

ModelGraph model_graph(const Config& config) {
  ModelGraph graph;
  std::map<std::string, std::string> alias;  // a block use's name -> its output layer
  std::map<std::string, int> uses;           // per stem
  std::string previous = nn::Model::kInput;
  for (size_t i = 0; i < config.model.size(); ++i) {
    const LayerConfig& layer = config.model[i];
    const std::string at = fmt::format("model[{}]", i);
    if (layer.kind != LayerKind::block) {
      graph.layers.push_back({layer, at});
      previous = layer.name;
      continue;
    }
    const auto block = std::find_if(config.blocks.begin(), config.blocks.end(),
                                    [&](const BlockConfig& b) { return b.name == layer.block.block; });
    if (block == config.blocks.end()) throw_config_error(config.where(at + ".block"), fmt::format("no block '{}'", layer.block.block));
    std::string input = layer.inputs.empty() ? previous : layer.inputs.front();
    for (int r = 0; r < layer.block.repeat; ++r) {
      const std::string use = layer.name + std::to_string(++uses[layer.name]);
      const std::string prefix = use + "/";
      for (size_t j = 0; j < block->layers.size(); ++j) {
        GraphLayer g{block->layers[j], fmt::format("blocks.{}[{}]", block->name, j)};
        g.layer.name = prefix + g.layer.name;
        if (g.layer.inputs.empty()) g.layer.inputs = {j == 0 ? input : prefix + block->layers[j - 1].name};
        else
          for (std::string& name : g.layer.inputs) name = name == nn::Model::kInput ? input : prefix + name;
        salt_seeds(g.layer, use);
        graph.layers.push_back(std::move(g));
      }
      if (std::any_of(config.model.begin(), config.model.end(), [&](const LayerConfig& l) { return l.name == use; }))
        throw_config_error(config.where(at), fmt::format("this block's use {} is named '{}', as a layer is; give the "
                                                         "use another name (name: STEM)", r + 1, use));
      input = alias[use] = prefix + block->layers.back().name;
    }
    previous = input;
  }
  // Names of block uses mean their outputs.
  for (GraphLayer& g : graph.layers)
    for (std::string& name : g.layer.inputs)
      if (alias.count(name)) name = alias[name];
  graph.output = config.outputs.empty() ? graph.layers.back().layer.name
                 : alias.count(config.outputs) ? alias[config.outputs] : config.outputs;
  return graph;
}

std::unique_ptr<nn::Model> make_model(const Config& config, const ModelGraph& graph) {
  auto model = std::make_unique<nn::Model>();
  for (const GraphLayer& g : graph.layers) {
    try {
      model->add(make_layer(g.layer), g.layer.inputs, config.where(g.at).str());
    } catch (const UsageError& e) {
      const std::string text = e.what();
      if (text.rfind(config.file, 0) == 0) throw;
      throw_config_error(config.where(g.at), text);
    }
  }
  if (!config.outputs.empty()) model->set_output(graph.output, config.where("outputs").str());
  model->connect();
  return model;
}

}  // namespace dtrain

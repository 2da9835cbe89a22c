// The model graph a config describes: its layers with the blocks expanded (use k of block NAME becomes the
// layers NAMEk/LAYER, each taking what its block names, 'input' being what the use takes), every input
// resolved to a full layer name, and the nn::Model made from them, whose graph errors (unknown names,
// cycles, unused layers, merges of mismatched shapes) are config errors at the layer's FILE:LINE:COL.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "core/nn/model.hpp"

namespace dtrain {

struct GraphLayer {
  LayerConfig layer;  // name and inputs: full names ("res1/conv_a"); never a block use
  std::string at;     // where the config declares it: "model[2]" or "blocks.res[1]" (Config::where)
};

struct ModelGraph {
  std::vector<GraphLayer> layers;  // in the config's order, each block use in place
  std::string output;              // the output layer's full name
  const GraphLayer& layer(const std::string& name) const;
};

ModelGraph model_graph(const Config& config);
// The graph's nn::Model, connected (layers made by make_layer).
std::unique_ptr<nn::Model> make_model(const Config& config, const ModelGraph& graph);

}  // namespace dtrain

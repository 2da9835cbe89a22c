#include "engine/checkpoint_model.hpp"

#include "engine/checkpoint_hooks.hpp"
#include "engine/model_graph.hpp"

namespace dtrain {

CheckpointModel open_checkpoint_model(const std::string& path) {
  CheckpointModel loaded;
  loaded.opened = checkpoint::open_checkpoint(path);
  const checkpoint::CheckpointIndex& index = loaded.opened.index;
  loaded.config = parse_config(index.meta.config, index.folder + "/index.h5:/meta/config", LoadOptions{{}, "", false, "", {}});
  Config& config = loaded.config;
  std::vector<int> ones(config.mesh.dims.size(), 1);
  for (auto& dim : config.mesh.dims) dim.size = 1;
  loaded.mesh = make_mesh(config.mesh.dim_names(), ones);
  loaded.built = build_model(config, loaded.mesh, config.data.example_shape());
  check_model_matches(config, *loaded.built.model, index);
  return loaded;
}

bool ends_in_softmax(const Config& config) {
  const ModelGraph graph = model_graph(config);
  const LayerConfig& last = graph.layer(graph.output).layer;
  return last.kind == LayerKind::softmax || (last.kind == LayerKind::dense && last.dense.activation == Activation::softmax);
}

}  // namespace dtrain

#include "core/nn/sequential.hpp"

#include "core/error.hpp"

namespace dtrain::nn {

void Sequential::add(std::unique_ptr<Layer> layer) {
  for (const auto& existing : layers_) {
    DTRAIN_CHECK_USAGE(existing->name() != layer->name(), "[model] two layers are named '{}'", layer->name());
  }
  layers_.push_back(std::move(layer));
}

void Sequential::build(const Shape& input_shape, LayoutMap& layouts, const MeshPtr& mesh) {
  variables_.clear();
  Shape shape = input_shape;
  for (const auto& layer : layers_) {
    for (const VariableSpec& spec : layer->variables(shape)) {
      const std::string path = layer->name() + "/" + spec.name;
      const LayoutChoice* followed = nullptr;
      std::string followed_path;
      if (!spec.follows.empty()) {
        followed_path = layer->name() + "/" + spec.follows;
        followed = &variable(followed_path).choice;
      }
      LayoutChoice choice = layouts.choose(path, spec.shape, mesh, followed, followed_path);
      variables_.push_back({path, spec.shape, spec.init, spec.trainable, choice});
    }
    shape = layer->output_shape(shape);
  }
}

const VariableInfo& Sequential::variable(const std::string& path) const {
  for (const auto& info : variables_) {
    if (info.path == path) return info;
  }
  throw Error(fmt::format("[model] no variable '{}'", path));
}

Shape Sequential::output_shape(const Shape& input_shape) const {
  Shape shape = input_shape;
  for (const auto& layer : layers_) shape = layer->output_shape(shape);
  return shape;
}

int64_t Sequential::num_parameters() const {
  int64_t total = 0;
  for (const auto& info : variables_) total += num_elements(info.shape);
  return total;
}

Parameters Sequential::initialize(int device_rank, const Place& place) const {
  Parameters params;
  for (const auto& info : variables_) {
    DTensor value = dtrain::initialize(info.init, info.shape, info.choice.layout, device_rank);
    if (place != Place::cpu()) value = DTensor(value.global_shape(), value.layout(), value.local().to(place));
    params.add(info.path, Var(std::move(value), info.trainable));
  }
  return params;
}

Var Sequential::forward(const Var& x, ForwardContext& context) const {
  Var y = x;
  for (const auto& layer : layers_) y = layer->forward(y, context);
  return y;
}

}  // namespace dtrain::nn

// A Sequential model: layers in order, every variable's global shape, initializer and layout (chosen once
// by build()), and per-rank Parameters made from them.
#pragma once
#include <memory>
#include <vector>

#include "core/nn/layer.hpp"
#include "core/nn/layout_map.hpp"

namespace dtrain::nn {

struct VariableInfo {
  std::string path;  // "<layer>/<name>"
  Shape shape;
  Initializer init;
  bool trainable = true;
  LayoutChoice choice;
};

class Sequential {
 public:
  void add(std::unique_ptr<Layer> layer);  // layer names must be unique
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

  // Shapes and layouts of every variable for a global input shape [B, ...] on `mesh`.
  void build(const Shape& input_shape, LayoutMap& layouts, const MeshPtr& mesh);
  const std::vector<VariableInfo>& variables() const { return variables_; }
  const VariableInfo& variable(const std::string& path) const;
  Shape output_shape(const Shape& input_shape) const;
  int64_t num_parameters() const;

  // This rank's shards of every variable, initialized from global indices (mesh-independent values), at
  // `place`: made on the host by the same initializers (the same bits as on the CPU), then moved there.
  Parameters initialize(int device_rank, const Place& place = Place::cpu()) const;
  Var forward(const Var& x, ForwardContext& context) const;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<VariableInfo> variables_;
};

}  // namespace dtrain::nn

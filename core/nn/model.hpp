// A model graph (Keras Functional): layers that each name their inputs (other layers, or the model's input
// kInput; none named: the layer added before, so a plain list is a Sequential stack), one output (the last
// layer added unless set_output names another), every variable's global shape, initializer and layout
// (chosen once by build()), and per-rank Parameters made from them.
// connect() checks the graph: unknown or repeated names, cycles, layers whose output reaches no output and
// inputs a layer cannot take; build() and layer_shapes() check shapes at merges. Messages start with the
// layer's `where` (its place in a config, "FILE:LINE:COL") when it has one.
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

class Model {
 public:
  static constexpr const char* kInput = "input";  // the model's input, as a name in `inputs`
  static constexpr int kInputNode = -1;           // ... and as a node index

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<std::string> input_names;  // as given (resolved by connect)
    std::string where;                     // for messages; may be empty
    std::vector<int> inputs;               // node indices or kInputNode, after connect()
  };

  // Layer names must be unique and not kInput. `inputs` empty: the layer added before (the model's input for
  // the first).
  void add(std::unique_ptr<Layer> layer, std::vector<std::string> inputs = {}, std::string where = "");
  void set_output(std::string name, std::string where = "");
  // Resolves the inputs and orders the layers; throws UsageError for the graph's errors (see above).
  void connect();

  const std::vector<Node>& nodes() const { return nodes_; }  // in the order added
  // After connect(): node indices with every layer after its inputs (the order added, where it already is so).
  const std::vector<int>& order() const { return order_; }
  int output() const { return output_; }

  // Shapes and layouts of every variable for a global input shape [B, ...] on `mesh` (connects first).
  void build(const Shape& input_shape, LayoutMap& layouts, const MeshPtr& mesh);
  const std::vector<VariableInfo>& variables() const { return variables_; }
  const VariableInfo& variable(const std::string& path) const;
  // Each node's output shape (indexed as nodes()) and the model's, for a global input shape [B, ...].
  std::vector<Shape> layer_shapes(const Shape& input_shape) const;
  Shape output_shape(const Shape& input_shape) const;
  int64_t num_parameters() const;

  // This rank's shards of every variable, initialized from global indices (mesh-independent values), at
  // `place`: made on the host by the same initializers (the same bits as on the CPU), then moved there.
  Parameters initialize(int device_rank, const Place& place = Place::cpu()) const;
  // The output; a value a fan-out shares feeds each of its users (backward sums their gradients).
  Var forward(const Var& x, ForwardContext& context) const;

 private:
  std::string at(int node) const;  // "WHERE: " or ""
  void check_connected() const;
  std::vector<Node> nodes_;
  std::string output_name_, output_where_;
  std::vector<int> order_;
  int output_ = kInputNode;
  bool connected_ = false;
  std::vector<VariableInfo> variables_;
};

}  // namespace dtrain::nn

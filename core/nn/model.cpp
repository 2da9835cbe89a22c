#include "core/nn/model.hpp"

#include <algorithm>
#include <optional>

#include "core/error.hpp"

namespace dtrain::nn {

std::string Model::at(int node) const {
  const std::string& where = node >= 0 ? nodes_[size_t(node)].where : output_where_;
  return where.empty() ? "" : where + ": ";
}

void Model::add(std::unique_ptr<Layer> layer, std::vector<std::string> inputs, std::string where) {
  const std::string prefix = where.empty() ? "" : where + ": ";
  DTRAIN_CHECK_USAGE(layer->name() != kInput, "{}[model] '{}' names the model's input; give the layer another name",
                     prefix, kInput);
  for (const auto& existing : nodes_) {
    DTRAIN_CHECK_USAGE(existing.layer->name() != layer->name(), "{}[model] two layers are named '{}'{}", prefix,
                       layer->name(), existing.where.empty() ? "" : " (the other at " + existing.where + ")");
  }
  if (inputs.empty()) inputs = {nodes_.empty() ? std::string(kInput) : nodes_.back().layer->name()};
  nodes_.push_back(Node{std::move(layer), std::move(inputs), std::move(where), {}});
  connected_ = false;
}

void Model::set_output(std::string name, std::string where) {
  output_name_ = std::move(name);
  output_where_ = std::move(where);
  connected_ = false;
}

void Model::connect() {
  DTRAIN_CHECK_USAGE(!nodes_.empty(), "[model] has no layers");
  std::vector<std::string> names;
  for (const Node& node : nodes_) names.push_back(node.layer->name());
  const auto index_of = [&](const std::string& name) {
    if (name == kInput) return kInputNode;
    const auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -2 : int(it - names.begin());
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    const Layer& layer = *node.layer;
    node.inputs.clear();
    for (const std::string& name : node.input_names) {
      const int input = index_of(name);
      DTRAIN_CHECK_USAGE(input != -2, "{}[model] layer '{}' takes input '{}', which is no layer's name (nor '{}', the "
                         "model's input)", at(int(i)), layer.name(), name, kInput);
      DTRAIN_CHECK_USAGE(input != int(i), "{}[model] layer '{}' takes its own output as input", at(int(i)), layer.name());
      node.inputs.push_back(input);
    }
    if (layer.arity() == 1) {
      DTRAIN_CHECK_USAGE(node.inputs.size() == 1, "{}[model] layer '{}' ({}) takes one input, got {} ({}); merge them "
                         "first (add, concatenate, ...)", at(int(i)), layer.name(), layer.kind(), node.inputs.size(),
                         fmt::join(node.input_names, ", "));
    } else {
      DTRAIN_CHECK_USAGE(node.inputs.size() >= 2, "{}[model] layer '{}' ({}) merges two or more inputs, got {}; name "
                         "them in its inputs", at(int(i)), layer.name(), layer.kind(), node.inputs.size());
    }
  }
  output_ = int(nodes_.size()) - 1;
  if (!output_name_.empty()) {
    output_ = index_of(output_name_);
    DTRAIN_CHECK_USAGE(output_ >= 0, "{}[model] the output '{}' is no layer's name", at(kInputNode), output_name_);
  }
  // Kahn's order, taking the earliest ready layer each time: the order added whenever that is an order.
  order_.clear();
  std::vector<bool> placed(nodes_.size(), false);
  while (order_.size() < nodes_.size()) {
    int ready = -1;
    for (size_t i = 0; i < nodes_.size() && ready < 0; ++i) {
      if (placed[i]) continue;
      const auto& inputs = nodes_[i].inputs;
      if (std::all_of(inputs.begin(), inputs.end(), [&](int in) { return in == kInputNode || placed[size_t(in)]; }))
        ready = int(i);
    }
    if (ready < 0) {  // every layer left waits on another: walk back along unplaced inputs to a cycle
      int node = int(std::find(placed.begin(), placed.end(), false) - placed.begin());
      std::vector<int> path;
      while (std::find(path.begin(), path.end(), node) == path.end()) {
        path.push_back(node);
        for (int in : nodes_[size_t(node)].inputs) {
          if (in != kInputNode && !placed[size_t(in)]) {
            node = in;
            break;
          }
        }
      }
      std::vector<std::string> cycle;
      for (auto it = std::find(path.begin(), path.end(), node); it != path.end(); ++it)
        cycle.insert(cycle.begin(), nodes_[size_t(*it)].layer->name());
      cycle.push_back(cycle.front());
      throw UsageError(fmt::format("{}[model] the layers' inputs form a cycle: {}", at(node), fmt::join(cycle, " -> ")));
    }
    placed[size_t(ready)] = true;
    order_.push_back(ready);
  }
  // Every layer must feed the output (Keras drops such a layer silently; here it is most likely a mistake).
  std::vector<bool> used(nodes_.size(), false);
  used[size_t(output_)] = true;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    if (!used[size_t(*it)]) continue;
    for (int in : nodes_[size_t(*it)].inputs)
      if (in != kInputNode) used[size_t(in)] = true;
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    DTRAIN_CHECK_USAGE(used[i], "{}[model] layer '{}' is unused: its output reaches no output (the model's output is "
                       "'{}'); name it in a later layer's inputs, or remove it", at(int(i)), nodes_[i].layer->name(),
                       nodes_[size_t(output_)].layer->name());
  }
  connected_ = true;
}

void Model::check_connected() const {
  DTRAIN_CHECK(connected_, "[model] the graph is not connected (call connect() or build() first)");
}

std::vector<Shape> Model::layer_shapes(const Shape& input_shape) const {
  check_connected();
  std::vector<Shape> shapes(nodes_.size());
  for (int i : order_) {
    const Node& node = nodes_[size_t(i)];
    std::vector<Shape> inputs;
    for (int in : node.inputs) inputs.push_back(in == kInputNode ? input_shape : shapes[size_t(in)]);
    if (node.layer->arity() == 1) {
      shapes[size_t(i)] = node.layer->output_shape_of(inputs);
      continue;
    }
    try {  // a merge's inputs come from several places: say which layer refused them
      shapes[size_t(i)] = node.layer->output_shape_of(inputs);
    } catch (const UsageError& e) {
      std::vector<std::string> named;
      for (size_t k = 0; k < inputs.size(); ++k)
        named.push_back(fmt::format("'{}' {}", node.input_names[k], shape_string(inputs[k])));
      throw UsageError(fmt::format("{}{} (inputs: {})", at(i), e.what(), fmt::join(named, ", ")));
    }
  }
  return shapes;
}

void Model::build(const Shape& input_shape, LayoutMap& layouts, const MeshPtr& mesh) {
  connect();
  variables_.clear();
  const std::vector<Shape> shapes = layer_shapes(input_shape);
  for (int i : order_) {
    const Node& node = nodes_[size_t(i)];
    const Shape& input = node.inputs[0] == kInputNode ? input_shape : shapes[size_t(node.inputs[0])];
    for (const VariableSpec& spec : node.layer->variables(input)) {
      const std::string path = node.layer->name() + "/" + spec.name;
      const LayoutChoice* followed = nullptr;
      std::string followed_path;
      if (!spec.follows.empty()) {
        followed_path = node.layer->name() + "/" + spec.follows;
        followed = &variable(followed_path).choice;
      }
      LayoutChoice choice = layouts.choose(path, spec.shape, mesh, followed, followed_path);
      variables_.push_back({path, spec.shape, spec.init, spec.trainable, choice});
    }
  }
}

const VariableInfo& Model::variable(const std::string& path) const {
  for (const auto& info : variables_) {
    if (info.path == path) return info;
  }
  throw Error(fmt::format("[model] no variable '{}'", path));
}

Shape Model::output_shape(const Shape& input_shape) const { return layer_shapes(input_shape)[size_t(output_)]; }

int64_t Model::num_parameters() const {
  int64_t total = 0;
  for (const auto& info : variables_) total += num_elements(info.shape);
  return total;
}

Parameters Model::initialize(int device_rank, const Place& place) const {
  Parameters params;
  for (const auto& info : variables_) {
    DTensor value = dtrain::initialize(info.init, info.shape, info.choice.layout, device_rank);
    if (place != Place::cpu()) value = DTensor(value.global_shape(), value.layout(), value.local().to(place));
    params.add(info.path, Var(std::move(value), info.trainable));
  }
  return params;
}

Var Model::forward(const Var& x, ForwardContext& context) const {
  check_connected();
  // Each value is dropped after its last user (without a tape, nothing else holds it).
  std::vector<int> users(nodes_.size(), 0);
  for (const Node& node : nodes_)
    for (int in : node.inputs)
      if (in != kInputNode) ++users[size_t(in)];
  std::vector<Var> values(nodes_.size());
  std::vector<Var> inputs;
  // train.precision bf16: a layer that computes takes bf16 values and gives bf16 values; a value is rounded
  // once, where it is made, or where a computing layer first takes it (the model's input, which a layer that
  // only moves values passes on unrounded).
  std::vector<char> rounded(nodes_.size(), 0);
  std::optional<Var> rounded_input;
  for (int i : order_) {
    const Node& node = nodes_[size_t(i)];
    const Layer& layer = *node.layer;
    const bool rounds = context.bf16 && !layer.moves_values() && !layer.takes_ids();
    inputs.clear();
    bool inputs_rounded = true;
    for (int in : node.inputs) {
      if (in == kInputNode) {
        if (rounds && !rounded_input) rounded_input = round_bf16(x);
        inputs.push_back(rounds ? *rounded_input : x);
        inputs_rounded &= rounds;
        continue;
      }
      if (rounds && !rounded[size_t(in)]) {
        values[size_t(in)] = round_bf16(values[size_t(in)]);
        rounded[size_t(in)] = 1;
      }
      inputs.push_back(values[size_t(in)]);
      inputs_rounded &= rounded[size_t(in)] != 0;
    }
    values[size_t(i)] = layer.forward_of(inputs, context);
    if (rounds) values[size_t(i)] = round_bf16(values[size_t(i)]);
    // An embedding's rows come from its rounded table: bf16 already.
    rounded[size_t(i)] = rounds || (context.bf16 && layer.takes_ids()) || (layer.moves_values() && inputs_rounded);
    for (int in : node.inputs)
      if (in != kInputNode && --users[size_t(in)] == 0 && in != output_) values[size_t(in)] = Var();
  }
  return values[size_t(output_)];
}

}  // namespace dtrain::nn

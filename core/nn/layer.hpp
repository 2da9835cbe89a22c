// A layer of a model graph: its output shape, the variables it needs (shape, initializer), and its
// forward pass on DTensor Vars. Layers hold only configuration; each rank's variables live in Parameters.
// Most layers take one input; merge layers (add, concatenate, ...) take several, through the *_of forms.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/autograd.hpp"
#include "core/ops/precision.hpp"
#include "core/random.hpp"

namespace dtrain::nn {

struct VariableSpec {
  std::string name;  // within the layer: "kernel", "bias", "gamma", "moving_mean", ...
  Shape shape;
  Initializer init;
  bool trainable = true;
  std::string follows;  // a bias names its kernel: it takes the kernel's last-axis sharding by default
};

// One rank's variables by path ("dense1/kernel"), in creation order.
class Parameters {
 public:
  void add(const std::string& path, Var var);
  Var& at(const std::string& path);
  const Var& at(const std::string& path) const;
  bool contains(const std::string& path) const { return vars_.count(path) > 0; }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::string> paths_;
  std::unordered_map<std::string, Var> vars_;
};

struct ForwardContext {
  Parameters& params;
  bool training = true;
  uint64_t step = 0;  // feeds dropout masks
  // Keras' mask_zero: the token ids [batch, length] an embedding with mask_zero saw; attention hides their
  // padding (id 0). Set by that embedding, read by the layers after it.
  std::optional<DTensor> padding_ids{};
  // train.precision: bf16: layers compute from bf16 values (core/ops/precision.hpp): the model rounds its
  // input and each layer's output, compute layers their variables as they read them.
  bool bf16 = false;
};

// Layer::arity() of a layer that takes two or more inputs.
inline constexpr int kManyInputs = -1;

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  virtual std::string kind() const = 0;
  // Shapes include the (global) batch axis.
  virtual Shape output_shape(const Shape& input) const = 0;
  virtual std::vector<VariableSpec> variables(const Shape& input) const { return {}; }
  virtual Var forward(const Var& x, ForwardContext& context) const = 0;
  // Whether the layer only moves or selects its input's values (flatten, relayout, max pooling, concatenate):
  // under train.precision bf16 its output is as rounded as its input, and it rounds nothing itself.
  virtual bool moves_values() const { return false; }
  // Whether its input is token ids (an embedding), never rounded.
  virtual bool takes_ids() const { return false; }

  // How many inputs the layer takes: 1, or kManyInputs (merge layers). The graph calls the *_of forms with
  // its inputs' shapes or values, in the order the layer names them; a one-input layer's take its one.
  virtual int arity() const { return 1; }
  virtual Shape output_shape_of(std::span<const Shape> inputs) const { return output_shape(inputs[0]); }
  virtual Var forward_of(std::span<const Var> inputs, ForwardContext& context) const {
    return forward(inputs[0], context);
  }

 protected:
  Var& variable(ForwardContext& context, const std::string& local_name) const {
    return context.params.at(name_ + "/" + local_name);
  }
  // A variable as a product or convolution reads it: rounded to bf16 under train.precision bf16 (the
  // float32 variable keeps its value and takes the bf16 gradient), itself otherwise.
  Var compute_variable(ForwardContext& context, const std::string& local_name) const {
    Var& stored = variable(context, local_name);
    return context.bf16 ? round_bf16(stored) : stored;
  }

 private:
  std::string name_;
};

}  // namespace dtrain::nn

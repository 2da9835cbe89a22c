// The layers dtrain models are built from (Keras names and defaults).
#pragma once
#include "core/nn/layer.hpp"
#include "core/ops/halo.hpp"

namespace dtrain::nn {

enum class Activation { None, Relu, Softmax, Sigmoid, Tanh, Gelu };
std::string activation_name(Activation activation);
Var activate(const Var& x, Activation activation);

// y = activation(x @ kernel + bias); kernel [in, units], bias [units]. On x [batch, ..., in] (rank >= 3) it
// applies to the last axis, as Keras' Dense does.
class Dense : public Layer {
 public:
  Dense(std::string name, int64_t units, Activation activation, bool use_bias, Initializer kernel_init,
        Initializer bias_init);
  std::string kind() const override { return "dense"; }
  Shape output_shape(const Shape& input) const override;
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  int64_t units_;
  Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
};

// Normalizes over the GLOBAL batch (axis 0; images [N, H, W, C] per channel over N, H and W, as Keras).
// Without center/scale and moving statistics it is the DTensor tutorial's parameter-free version, which uses
// batch statistics in training AND inference. With moving statistics (Keras BatchNormalization) inference
// uses the moving mean and variance.
class BatchNorm : public Layer {
 public:
  struct Options {
    bool center = false, scale = false, moving_statistics = false;
    float momentum = 0.99f, epsilon = 1e-5f;
  };
  BatchNorm(std::string name, Options options);
  std::string kind() const override { return "batch_norm"; }
  Shape output_shape(const Shape& input) const override { return input; }
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  Options options_;
};

class Dropout : public Layer {
 public:
  Dropout(std::string name, float rate, uint64_t seed);
  std::string kind() const override { return "dropout"; }
  Shape output_shape(const Shape& input) const override { return input; }
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  float rate_;
  uint64_t seed_;
};

// [N, ...] -> [N, prod(...)]
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}
  std::string kind() const override { return "flatten"; }
  bool moves_values() const override { return true; }
  Shape output_shape(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;
};

// Keras Conv2D on NHWC batches: kernel [kh, kw, cin, filters], bias [filters]; see core/ops/conv.hpp for
// the spatial (halo) and channel sharding rules.
class Conv2D : public Layer {
 public:
  struct Options {
    int64_t filters = 1, kernel_h = 3, kernel_w = 3, stride_h = 1, stride_w = 1;
    ops::Padding padding = ops::Padding::Valid;
    Activation activation = Activation::None;
    bool use_bias = true;
    Initializer kernel_init, bias_init;
  };
  Conv2D(std::string name, Options options);
  std::string kind() const override { return "conv2d"; }
  Shape output_shape(const Shape& input) const override;
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  Options options_;
};

// Keras MaxPooling2D / AveragePooling2D.
class Pool2D : public Layer {
 public:
  enum class Kind { Max, Average };
  struct Options {
    Kind kind = Kind::Max;
    int64_t pool_h = 2, pool_w = 2, stride_h = 2, stride_w = 2;
    ops::Padding padding = ops::Padding::Valid;
  };
  Pool2D(std::string name, Options options);
  std::string kind() const override { return options_.kind == Kind::Max ? "max_pool2d" : "avg_pool2d"; }
  bool moves_values() const override { return options_.kind == Kind::Max; }
  Shape output_shape(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  Options options_;
};

// [N, H, W, C] -> [N, C] (Keras GlobalAveragePooling2D); [N, T, D] -> [N, D] (GlobalAveragePooling1D,
// after an embedding).
class GlobalAveragePool : public Layer {
 public:
  explicit GlobalAveragePool(std::string name) : Layer(std::move(name)) {}
  std::string kind() const override { return "global_average_pool"; }
  Shape output_shape(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;
};

// Keras Embedding: ids [N, ...] (as floats) -> [N, ..., output_dim]; the table "embeddings" [input_dim,
// output_dim] (core/ops/embedding.hpp: its rows may be sharded).
class Embedding : public Layer {
 public:
  // mask_zero: id 0 is padding, which later attention layers hide (Keras' mask_zero).
  Embedding(std::string name, int64_t input_dim, int64_t output_dim, Initializer init, bool mask_zero = false);
  std::string kind() const override { return "embedding"; }
  bool takes_ids() const override { return true; }
  Shape output_shape(const Shape& input) const override;
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  int64_t input_dim_, output_dim_;
  Initializer init_;
  bool mask_zero_;
};

// Keras LayerNormalization over the last axis: gamma (ones) and beta (zeros) [features] when scale / center.
class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, float epsilon, bool center, bool scale);
  std::string kind() const override { return "layer_norm"; }
  Shape output_shape(const Shape& input) const override { return input; }
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  float epsilon_;
  bool center_, scale_;
};

// keras_hub's PositionEmbedding (TokenAndPositionEmbedding's position half): a learned "embeddings"
// [sequence_length, features] added to x [batch, sequence_length, features].
class PositionEmbedding : public Layer {
 public:
  PositionEmbedding(std::string name, Initializer init) : Layer(std::move(name)), init_(init) {}
  std::string kind() const override { return "position_embedding"; }
  Shape output_shape(const Shape& input) const override;
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  Initializer init_;
};

// Keras' MultiHeadAttention as self-attention (query = key = value = x [batch, length, features]):
// query/kernel [features, heads, key_dim], key/kernel likewise, value/kernel [features, heads, value_dim],
// attention_output/kernel [heads, value_dim, output], each with a bias (use_bias). Sharding the heads axis of
// the four kernels on one mesh dim is tensor parallelism; the output comes back in x's layout (all-reduce,
// or reduce-scatter when x's layout shards an axis on that dim). See core/ops/attention.hpp.
class MultiHeadAttention : public Layer {
 public:
  struct Options {
    int64_t num_heads = 1, key_dim = 1, value_dim = 0;  // value_dim 0: key_dim
    int64_t output_dim = 0;                             // 0: the input's features
    float dropout = 0.0f;
    uint64_t seed = 0;  // the dropout masks' key
    bool use_bias = true, causal = false;
    Initializer kernel_init, bias_init;
  };
  MultiHeadAttention(std::string name, Options options);
  std::string kind() const override { return "multi_head_attention"; }
  Shape output_shape(const Shape& input) const override;
  std::vector<VariableSpec> variables(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  Options options_;
};

// DTensor's relayout: the activations moved to the layout of `specs` (one per axis, batch first).
class Relayout : public Layer {
 public:
  Relayout(std::string name, std::vector<std::string> specs) : Layer(std::move(name)), specs_(std::move(specs)) {}
  std::string kind() const override { return "relayout"; }
  bool moves_values() const override { return true; }
  Shape output_shape(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  std::vector<std::string> specs_;
};

// Keras' merge layers over two or more inputs of one shape: add, subtract (exactly two: a - b), multiply,
// average; concatenate joins them along `axis` (negative counts from the end; never the batch axis 0), their
// other axes equal. Mismatched shapes are UsageErrors naming both.
class Merge : public Layer {
 public:
  enum class Kind { Add, Subtract, Multiply, Average, Concatenate };
  Merge(std::string name, Kind kind, int axis = -1);
  std::string kind() const override;
  bool moves_values() const override { return kind_ == Kind::Concatenate; }
  int arity() const override { return kManyInputs; }
  Shape output_shape_of(std::span<const Shape> inputs) const override;
  Var forward_of(std::span<const Var> inputs, ForwardContext& context) const override;
  // One input is not enough: these refuse.
  Shape output_shape(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;

 private:
  int axis_of(int rank) const;  // axis_ as an index into a shape of `rank`
  Kind kind_;
  int axis_;
};

class ActivationLayer : public Layer {
 public:
  ActivationLayer(std::string name, Activation activation) : Layer(std::move(name)), activation_(activation) {}
  std::string kind() const override { return activation_name(activation_); }
  Shape output_shape(const Shape& input) const override { return input; }
  Var forward(const Var& x, ForwardContext& context) const override { return activate(x, activation_); }

 private:
  Activation activation_;
};

}  // namespace dtrain::nn

// The layers dtrain models are built from (Keras names and defaults).
#pragma once
#include "core/nn/layer.hpp"

namespace dtrain::nn {

enum class Activation { None, Relu, Softmax };
std::string activation_name(Activation activation);
Var activate(const Var& x, Activation activation);

// y = activation(x @ kernel + bias); kernel [in, units], bias [units].
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

// Normalizes over the GLOBAL batch (axis 0). Without center/scale and moving statistics it is the DTensor
// tutorial's parameter-free version, which uses batch statistics in training AND inference. With
// moving statistics (Keras BatchNormalization) inference uses the moving mean and variance.
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
  Shape output_shape(const Shape& input) const override;
  Var forward(const Var& x, ForwardContext& context) const override;
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

// Sigmoid, tanh and gelu (the exact erf form: x * Phi(x), Keras' default approximate=False). Elementwise: the
// output keeps the input's layout; pending partial sums are added first (the maps are not linear).
#pragma once
#include "core/autograd.hpp"
#include "core/dtensor.hpp"

namespace dtrain::ops {

DTensor sigmoid(const DTensor& a);
DTensor tanh(const DTensor& a);
DTensor gelu(const DTensor& a);
// The vjps: grad * f'(input), from the output (sigmoid, tanh) or the input (gelu).
DTensor sigmoid_grad(const DTensor& grad, const DTensor& output);
DTensor tanh_grad(const DTensor& grad, const DTensor& output);
DTensor gelu_grad(const DTensor& grad, const DTensor& input);

}  // namespace dtrain::ops

namespace dtrain {

Var sigmoid(const Var& a);
Var tanh(const Var& a);
Var gelu(const Var& a);

}  // namespace dtrain

// Reverse-mode autodiff over DTensor ops, one graph per rank (every rank records the same graph, SPMD).
// A Var is a handle to a value and, if it was computed from Vars that need gradients, the node that made
// it. backward() walks the graph from a scalar loss. A gradient is kept in the layout of the value it
// belongs to, minus partial dims (a partial value's summands all receive the full gradient) — except on
// leaves marked keep_partial_grad, whose gradient stays as the ops produced it, possibly partial.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtensor.hpp"

namespace dtrain {

struct Node;

struct VarState {
  DTensor value;
  bool requires_grad = false;
  std::optional<DTensor> grad;    // accumulated by backward() on leaves
  std::shared_ptr<Node> producer;  // null for leaves
  // A leaf whose gradient may stay partial (pending sums): its optimizer sums it where it updates.
  bool keep_partial_grad = false;
  // A leaf whose optimizer can take a matmul's weight gradient x^T g as the pair (x, g), unmultiplied:
  // with data parallelism it gathers x and g (small) and computes only the rows it updates, instead of
  // every rank computing all of x_r^T g_r and summing them (large). Set by the optimizer.
  bool accepts_grad_factors = false;
  struct GradFactors {
    DTensor x, g;  // the gradient is matmul(x, g, transpose_a = true)
  };
  std::vector<GradFactors> grad_factors;  // pending terms of the gradient, beside `grad`
  // backward()'s bookkeeping, kept here rather than in hash maps keyed by state (a step walks ~20 states
  // per rank; the maps' allocations cost more than the walk): the call that last visited this state, and
  // the gradient summed so far for it during that call.
  uint64_t backward_visit = 0;
  std::optional<DTensor> backward_pending;
};

class Var {
 public:
  Var() = default;
  explicit Var(DTensor value, bool requires_grad = false);

  const DTensor& value() const { return state_->value; }
  DTensor& value() { return state_->value; }
  bool requires_grad() const { return state_->requires_grad; }
  bool is_leaf() const { return state_->producer == nullptr; }
  bool defined() const { return state_ != nullptr; }
  // The gradient accumulated by backward(); throws if there is none.
  const DTensor& grad() const;
  bool has_grad() const { return state_->grad.has_value() || !state_->grad_factors.empty(); }
  void zero_grad() {
    state_->grad.reset();
    state_->grad_factors.clear();
  }
  // Replaces the value in place (optimizers); the layout must stay.
  void assign(DTensor value);

  const std::shared_ptr<VarState>& state() const { return state_; }

 private:
  std::shared_ptr<VarState> state_;
};

// Given the gradient of the output, the gradients of each input (nullopt where none flows).
using VjpFn = std::function<std::vector<std::optional<DTensor>>(const DTensor& grad_output)>;

struct Node {
  std::string op;
  std::vector<std::shared_ptr<VarState>> inputs;
  VjpFn vjp;
};

// Wraps an op's output; records a node when any input requires a gradient.
Var record(const std::string& op, DTensor output, const std::vector<Var>& inputs, VjpFn vjp);

// Accumulates d(loss)/d(leaf) into every leaf that requires a gradient. `loss` must be a scalar.
void backward(const Var& loss);

// While alive, ops record no graph (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();

 private:
  bool previous_;
};
bool grad_enabled();

}  // namespace dtrain

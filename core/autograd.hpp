// Reverse-mode autodiff over DTensor ops, one graph per rank (every rank records the same graph, SPMD).
// A Var is a handle to a value and, if it was computed from Vars that need gradients, the node that made
// it. backward() walks the graph from a scalar loss. A gradient is kept in the layout of the value it
// belongs to, minus partial dims (a partial value's summands all receive the full gradient) — except on
// leaves marked keep_partial_grad, whose gradient stays as the ops produced it, possibly partial.
#pragma once
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/dtensor.hpp"
#include "core/inline_vector.hpp"

namespace dtrain {

struct Node;

struct VarState {
  VarState(DTensor value, bool requires_grad) : value(std::move(value)), requires_grad(requires_grad) {}
  VarState(const VarState&) = delete;  // `producer` may point into the object that holds this state
  VarState& operator=(const VarState&) = delete;

  DTensor value;
  bool requires_grad = false;
  std::optional<DTensor> grad;  // accumulated by backward() on leaves
  // The node that computed this value, null for leaves. It lives in the same allocation as this state
  // (see record()), which keeps it alive.
  const Node* producer = nullptr;
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
  // per rank; the maps' allocations cost more than the walk): the call that last visited this state, the
  // gradient summed so far for it during that call, and the next state in that call's order.
  uint64_t backward_visit = 0;
  std::optional<DTensor> backward_pending;
  VarState* backward_next = nullptr;
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
  explicit Var(std::shared_ptr<VarState> state) : state_(std::move(state)) {}
  template <class Vjp>
  friend Var record(const char* op, DTensor output, std::initializer_list<Var> inputs, Vjp vjp);

  std::shared_ptr<VarState> state_;
};

inline constexpr size_t kMaxOpInputs = 4;
// What a vjp returns: the gradient of each input (nullopt where none flows).
using Gradients = InlineVector<std::optional<DTensor>, kMaxOpInputs>;

struct Node {
  const char* op;
  InlineVector<std::shared_ptr<VarState>, kMaxOpInputs> inputs;
  // Given the gradient of the output, the gradients of each input.
  virtual Gradients vjp(const DTensor& grad_output) const = 0;

 protected:
  ~Node() = default;
};

namespace detail {

bool records(std::initializer_list<Var> inputs);  // whether an op on `inputs` records a node

template <class Vjp>
struct NodeWith final : Node {
  explicit NodeWith(Vjp f) : f(std::move(f)) {}
  Gradients vjp(const DTensor& grad_output) const override {
    auto grads = f(grad_output);
    if constexpr (std::is_same_v<decltype(grads), Gradients>) {
      return grads;
    } else {  // a std::vector<std::optional<DTensor>>
      return Gradients(std::make_move_iterator(grads.begin()), std::make_move_iterator(grads.end()));
    }
  }
  Vjp f;
};

// A recorded value and its node in one allocation (with the vjp's captures).
template <class Vjp>
struct RecordedState final : VarState {
  RecordedState(DTensor value, const char* op, std::initializer_list<Var> inputs, Vjp vjp)
      : VarState(std::move(value), true), node(std::move(vjp)) {
    node.op = op;
    for (const Var& input : inputs) node.inputs.push_back(input.state());
    producer = &node;
  }
  NodeWith<Vjp> node;
};

}  // namespace detail

// Wraps an op's output; records a node when any input requires a gradient. `vjp(grad_output)` returns
// the inputs' gradients as Gradients or a std::vector<std::optional<DTensor>>.
template <class Vjp>
Var record(const char* op, DTensor output, std::initializer_list<Var> inputs, Vjp vjp) {
  if (!detail::records(inputs)) return Var(std::move(output));
  return Var(std::make_shared<detail::RecordedState<Vjp>>(std::move(output), op, inputs, std::move(vjp)));
}

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

}  // namespace dtrain

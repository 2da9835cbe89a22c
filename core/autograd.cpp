#include "core/autograd.hpp"

#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/ops/ops.hpp"

namespace dtrain {
namespace {

// Gradient recording is per rank: a fiber-local flag (a non-null slot means "no grad"), so one rank's
// NoGradGuard never leaks into another rank sharing its thread.
bool grad_enabled_here() { return fibers::local(fibers::Slot::NoGrad) == nullptr; }
void set_grad_enabled(bool enabled) {
  static int marker;
  fibers::local(fibers::Slot::NoGrad) = enabled ? nullptr : &marker;
}

// The layout a gradient of `value` takes: the same sharding, never partial.
DTensor to_gradient_layout(const DTensor& grad, const DTensor& value) {
  DTRAIN_CHECK(grad.global_shape() == value.global_shape(), "[backward] gradient {} for a value {}", grad.describe(),
               value.describe());
  return redistribute(grad, value.layout());
}

}  // namespace

Var::Var(DTensor value, bool requires_grad) : state_(std::make_shared<VarState>(VarState{std::move(value), requires_grad, std::nullopt, nullptr})) {}

const DTensor& Var::grad() const {
  DTRAIN_CHECK(state_->grad.has_value(), "[autograd] no gradient for a value {}", state_->value.describe());
  return *state_->grad;
}

void Var::assign(DTensor value) {
  DTRAIN_CHECK(value.layout() == state_->value.layout() && value.global_shape() == state_->value.global_shape(),
               "[autograd] assign {} to a variable {}", value.describe(), state_->value.describe());
  state_->value = std::move(value);
}

Var record(const std::string& op, DTensor output, const std::vector<Var>& inputs, VjpFn vjp) {
  bool needs = false;
  if (grad_enabled_here()) {
    for (const auto& input : inputs) needs = needs || input.requires_grad();
  }
  Var result(std::move(output), needs);
  if (needs) {
    auto node = std::make_shared<Node>();
    node->op = op;
    for (const auto& input : inputs) node->inputs.push_back(input.state());
    node->vjp = std::move(vjp);
    result.state()->producer = std::move(node);
  }
  return result;
}

void backward(const Var& loss) {
  DTRAIN_CHECK(loss.value().rank() == 0, "[backward] the loss must be a scalar, not {}", loss.value().describe());
  if (!loss.requires_grad()) return;

  // Topological order of the states that lead to the loss (depth-first, iterative).
  std::vector<VarState*> order;
  std::unordered_set<VarState*> visited;
  std::vector<std::pair<VarState*, size_t>> stack{{loss.state().get(), 0}};
  visited.insert(loss.state().get());
  while (!stack.empty()) {
    auto& [state, next] = stack.back();
    const auto* node = state->producer.get();
    if (node && next < node->inputs.size()) {
      VarState* input = node->inputs[next++].get();
      if (input->requires_grad && visited.insert(input).second) stack.push_back({input, 0});
      continue;
    }
    order.push_back(state);
    stack.pop_back();
  }

  std::unordered_map<VarState*, DTensor> pending;
  const DTensor& value = loss.value();
  Layout scalar = value.layout();
  pending.emplace(loss.state().get(), DTensor({}, scalar, Tensor({}, 1.0f)));
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    VarState* state = *it;
    auto found = pending.find(state);
    if (found == pending.end()) continue;
    DTensor grad = state->keep_partial_grad ? found->second : to_gradient_layout(found->second, state->value);
    pending.erase(found);
    if (!state->producer) {
      if (state->grad) {
        state->grad = ops::add(*state->grad, grad);
      } else {
        state->grad = grad;
      }
      continue;
    }
    const Node& node = *state->producer;
    std::vector<std::optional<DTensor>> input_grads = node.vjp(grad);
    DTRAIN_CHECK(input_grads.size() == node.inputs.size(), "[backward] {} returned {} gradients for {} inputs", node.op,
                 input_grads.size(), node.inputs.size());
    for (size_t i = 0; i < input_grads.size(); ++i) {
      VarState* input = node.inputs[i].get();
      if (!input->requires_grad || !input_grads[i]) continue;
      DTensor g = input->keep_partial_grad ? *input_grads[i] : to_gradient_layout(*input_grads[i], input->value);
      auto slot = pending.find(input);
      if (slot == pending.end()) {
        pending.emplace(input, std::move(g));
      } else {
        slot->second = ops::add(slot->second, g);
      }
    }
  }
}

NoGradGuard::NoGradGuard() : previous_(grad_enabled_here()) { set_grad_enabled(false); }
NoGradGuard::~NoGradGuard() { set_grad_enabled(previous_); }
bool grad_enabled() { return grad_enabled_here(); }

}  // namespace dtrain

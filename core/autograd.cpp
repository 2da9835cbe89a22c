#include "core/autograd.hpp"

#include <atomic>

#include "core/cache_line.hpp"
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

Var::Var(DTensor value, bool requires_grad) : state_(std::make_shared<VarState>(std::move(value), requires_grad)) {}

const DTensor& Var::grad() const {
  DTRAIN_CHECK(state_->grad.has_value(), "[autograd] no gradient for a value {}", state_->value.describe());
  return *state_->grad;
}

void Var::assign(DTensor value) {
  DTRAIN_CHECK(value.layout() == state_->value.layout() && value.global_shape() == state_->value.global_shape(),
               "[autograd] assign {} to a variable {}", value.describe(), state_->value.describe());
  state_->value = std::move(value);
}

namespace detail {

bool records(std::initializer_list<Var> inputs) {
  if (!grad_enabled_here()) return false;
  for (const auto& input : inputs) {
    if (input.requires_grad()) return true;
  }
  return false;
}

}  // namespace detail

void backward(const Var& loss) {
  DTRAIN_CHECK(loss.value().rank() == 0, "[backward] the loss must be a scalar, not {}", loss.value().describe());
  if (!loss.requires_grad()) return;

  // Each call marks the states it visits with its own number (ranks run backward concurrently, each on
  // its own graph, so the numbers only need to be unique).
  static OwnCacheLine<std::atomic<uint64_t>> calls;
  const uint64_t visit = calls.value.fetch_add(1) + 1;

  // Reverse topological order of the states that lead to the loss (depth-first, iterative): a list
  // threaded through the states, each pushed to the front when its inputs are done.
  VarState* first = nullptr;
  // The walk's stack is per-thread scratch: the walk runs no collective, so no other rank's fiber runs
  // on this thread before it ends.
  thread_local std::vector<std::pair<VarState*, size_t>> stack;
  stack.clear();
  stack.push_back({loss.state().get(), 0});
  loss.state()->backward_visit = visit;
  while (!stack.empty()) {
    auto& [state, next] = stack.back();
    const Node* node = state->producer;
    if (node && next < node->inputs.size()) {
      VarState* input = node->inputs[next++].get();
      if (input->requires_grad && input->backward_visit != visit) {
        input->backward_visit = visit;
        input->backward_pending.reset();
        stack.push_back({input, 0});
      }
      continue;
    }
    state->backward_next = first;
    first = state;
    stack.pop_back();
  }

  // The seed d loss / d loss = 1 lies where the loss does: on a GPU rank a host seed would reach the CUDA
  // kernels of the first gradient as a host pointer.
  const DTensor& value = loss.value();
  Tensor seed = Tensor::uninitialized({}, value.local().place());
  seed.fill(1.0f);
  loss.state()->backward_pending = DTensor({}, value.layout(), seed);
  for (VarState* state = first; state != nullptr; state = state->backward_next) {
    if (!state->backward_pending) continue;
    DTensor pending = std::move(*state->backward_pending);
    state->backward_pending.reset();
    DTensor grad = state->keep_partial_grad ? std::move(pending) : to_gradient_layout(pending, state->value);
    if (!state->producer) {
      if (state->grad) {
        state->grad = ops::add(*state->grad, grad);
      } else {
        state->grad = std::move(grad);
      }
      continue;
    }
    const Node& node = *state->producer;
    // A gradient lies where its value does; one elsewhere would reach the kernels as a foreign pointer.
    DTRAIN_CHECK(grad.local().place() == state->value.local().place(), "[backward] the gradient of {} is at {}, its value at {}",
                 node.op, grad.local().place().describe(), state->value.local().place().describe());
    Gradients input_grads = node.vjp(grad);
    DTRAIN_CHECK(input_grads.size() == node.inputs.size(), "[backward] {} returned {} gradients for {} inputs", node.op,
                 input_grads.size(), node.inputs.size());
    for (size_t i = 0; i < input_grads.size(); ++i) {
      VarState* input = node.inputs[i].get();
      if (!input->requires_grad || !input_grads[i]) continue;
      DTensor g = input->keep_partial_grad ? std::move(*input_grads[i]) : to_gradient_layout(*input_grads[i], input->value);
      if (!input->backward_pending) {
        input->backward_pending = std::move(g);
      } else {
        input->backward_pending = ops::add(*input->backward_pending, g);
      }
    }
  }
}

NoGradGuard::NoGradGuard() : previous_(grad_enabled_here()) { set_grad_enabled(false); }
NoGradGuard::~NoGradGuard() { set_grad_enabled(previous_); }

}  // namespace dtrain

// Test helpers for SPMD equivalence: the meshes every op is tried on, every legal layout of a shape, and
// a runner that places global inputs in chosen layouts, runs an op with autograd on every rank, and
// returns the global output and input gradients (unpacked from all ranks' shards).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/mpi/mpi.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/ops/ops.hpp"

namespace dtrain::testing {

// The non-zeros of a rows x cols row-major matrix, found by the obvious loop (NaNs are non-zeros): what
// the kernels' own compression and a dataset's lists are checked against.
inline CompressedRows compressed_rows_of(const float* a, int64_t rows, int64_t cols) {
  CompressedRows out;
  out.rows = rows;
  out.cols = cols;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      if (a[r * cols + c] != 0.0f) out.entries.push_back({int32_t(c), a[r * cols + c]});
    out.row_starts.push_back(int64_t(out.entries.size()));
  }
  return out;
}

// {1}, {2}, {4}, {8}, {2,2}, {4,2}, {2,2,2}. Under `mpirun -np P`, those that spread over the P processes.
inline std::vector<MeshPtr> test_meshes() {
  std::vector<MeshPtr> all{make_mesh({"x"}, {1}),         make_mesh({"x"}, {2}),           make_mesh({"x"}, {4}),
                           make_mesh({"x"}, {8}),         make_mesh({"x", "y"}, {2, 2}),   make_mesh({"x", "y"}, {4, 2}),
                           make_mesh({"x", "y", "z"}, {2, 2, 2})};
  std::vector<MeshPtr> spread;
  for (MeshPtr mesh : all)
    if (mesh->size() % process_count() == 0) spread.push_back(mesh);
  return spread;
}

// Every rank's `local` (equal sizes on every rank), gathered over the whole mesh: under mpirun a process
// holds only its own ranks' shards, and the checks need all of them.
inline std::vector<Tensor> gather_locals(const DeviceContext& device, const Tensor& local) {
  const Group& everyone = device.group(device.mesh->dim_names());
  std::vector<float> all(size_t(local.size()) * size_t(everyone.size()));
  device.comm->all_gather(everyone, host_view(local.data(), size_t(local.size())), host_view(all));
  std::vector<Tensor> out;
  for (int member = 0; member < everyone.size(); ++member) {
    Tensor piece(local.shape());
    std::copy_n(all.data() + size_t(member) * size_t(local.size()), local.size(), piece.data());
    out.push_back(piece);
  }
  return out;
}

// Every layout of `shape` on `mesh`: each axis unsharded or one unused dim that divides its extent.
inline std::vector<Layout> all_layouts(const MeshPtr& mesh, const Shape& shape) {
  std::vector<std::vector<std::string>> partial{{}};
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    std::vector<std::vector<std::string>> next;
    for (const auto& specs : partial) {
      auto with = specs;
      with.push_back(kUnsharded);
      next.push_back(with);
      for (int d = 0; d < mesh->num_dims(); ++d) {
        const std::string& dim = mesh->dim_names()[d];
        if (std::find(specs.begin(), specs.end(), dim) != specs.end()) continue;
        if (shape[axis] % mesh->dim_sizes()[d] != 0) continue;
        auto sharded = specs;
        sharded.push_back(dim);
        next.push_back(sharded);
      }
    }
    partial = std::move(next);
  }
  std::vector<Layout> layouts;
  for (auto& specs : partial) layouts.emplace_back(specs, mesh);
  return layouts;
}

// Every combination of the inputs' layouts on one mesh.
inline std::vector<std::vector<Layout>> layout_combinations(const MeshPtr& mesh, const std::vector<Tensor>& inputs) {
  std::vector<std::vector<Layout>> combos{{}};
  for (const auto& input : inputs) {
    std::vector<std::vector<Layout>> next;
    for (const auto& combo : combos) {
      for (const auto& layout : all_layouts(mesh, input.shape())) {
        next.push_back(combo);
        next.back().push_back(layout);
      }
    }
    combos = std::move(next);
  }
  return combos;
}

// Deterministic test data in [-1, 1) (or [lo, hi)).
inline Tensor test_tensor(const Shape& shape, int seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(shape);
  uint64_t state = 0x9E3779B97F4A7C15ull * uint64_t(seed + 1);
  for (int64_t i = 0; i < t.size(); ++i) {
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    float u = float((state * 0x2545F4914F6CDD1Dull) >> 40) / float(1 << 24);
    t[i] = lo + (hi - lo) * u;
  }
  return t;
}

struct SpmdResult {
  Tensor output;
  std::vector<Tensor> grads;  // one per input (empty tensor when the op gave none)
};

using VarOp = std::function<Var(const std::vector<Var>&)>;

// Runs op on inputs placed in `layouts`; loss = sum(op(...) * cotangent); returns output and gradients.
inline SpmdResult run_op(const MeshPtr& mesh, const std::vector<Tensor>& inputs, const std::vector<Layout>& layouts,
                         const VarOp& op, const Tensor& cotangent, bool differentiate = true) {
  const int n = mesh->size();
  std::vector<Tensor> out_locals(n);
  std::vector<std::vector<Tensor>> grad_locals(inputs.size(), std::vector<Tensor>(n));
  std::vector<Layout> grad_layouts = layouts;
  std::optional<DTensor> out_meta;
  std::mutex mutex;
  // A mesh the processes do not divide (the one-device reference under mpirun) runs in each process.
  const bool spread = process_count() > 1 && mesh->size() % process_count() == 0;
  (spread ? run_spmd : run_spmd_in_process)(mesh, [&](DeviceContext& device) {
    std::vector<Var> vars;
    for (size_t i = 0; i < inputs.size(); ++i) {
      DTensor value(inputs[i].shape(), layouts[i], pack(inputs[i], layouts[i], device.rank));
      vars.emplace_back(value, differentiate);
    }
    Var out = op(vars);
    if (differentiate) {
      Layout replicated = Layout::replicated(mesh, int(cotangent.rank()));
      Var weight(DTensor(cotangent.shape(), replicated, cotangent.clone()));
      std::vector<int> all_axes;
      for (int a = 0; a < out.value().rank(); ++a) all_axes.push_back(a);
      backward(reduce_sum(multiply(out, weight), all_axes));
    }
    if (spread) {  // every process needs every rank's shards (ranks of one process fill its vectors alike)
      std::vector<Tensor> outs = gather_locals(device, out.value().local());
      std::vector<std::vector<Tensor>> grads(vars.size());
      for (size_t i = 0; differentiate && i < vars.size(); ++i)
        if (vars[i].has_grad()) grads[i] = gather_locals(device, vars[i].grad().local());
      std::lock_guard<std::mutex> lock(mutex);
      out_locals = outs;
      if (!out_meta) out_meta = out.value();
      for (size_t i = 0; i < vars.size(); ++i)
        if (!grads[i].empty()) grad_locals[i] = grads[i];
      return;
    }
    std::lock_guard<std::mutex> lock(mutex);
    out_locals[device.rank] = out.value().local();
    if (device.rank == 0) out_meta = out.value();
    for (size_t i = 0; differentiate && i < vars.size(); ++i) {
      if (vars[i].has_grad()) grad_locals[i][device.rank] = vars[i].grad().local();
    }
  });
  SpmdResult result;
  result.output = unpack(out_meta->global_shape(), out_meta->layout(), out_locals, out_meta->partial_names());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (differentiate && grad_locals[i][0].shape() == layouts[i].local_shape(inputs[i].shape()))
      result.grads.push_back(unpack(inputs[i].shape(), layouts[i], grad_locals[i]));
    else
      result.grads.push_back(Tensor());
  }
  return result;
}

// |a-b| <= tol * max(1, |b|) everywhere; reports the first violation.
inline bool close(const Tensor& a, const Tensor& b, float tol = 1e-5f, std::string* why = nullptr) {
  if (a.shape() != b.shape()) {
    if (why) *why = "shape " + shape_string(a.shape()) + " vs " + shape_string(b.shape());
    return false;
  }
  for (int64_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= tol * std::max(1.0f, std::fabs(b[i])))) {
      if (why) *why = fmt::format("element {}: {} vs {}", i, a[i], b[i]);
      return false;
    }
  }
  return true;
}

}  // namespace dtrain::testing

// Attention on sequence shards, two ways: the product's (core/ops/attention.cpp: each seq shard gathers the
// whole keys and values, and the keys' and values' gradients are reduce-scattered back) against a ring
// (each shard keeps its queries, computes blockwise attention with an online-softmax merge while the K/V
// chunks move one member along the `seq` group per step; the backward recomputes each block from the saved
// log-sum-exp and sends dK/dV around with their chunks, so nothing is reduced). The ring lives here, as the
// measured alternative: the product keeps the faster one at the sizes dtrain runs (README, "attention").
//
// Checks first (nccl-tests' habit): on every mesh and size the ring's output and q/k/v gradients equal the
// gather's within 2e-5 relative (exit 1 otherwise). Then one JSON line per case with the medians of
// forward and forward+backward for both, and the ring's compute alone (its passes skipped) to show what
// the transport costs. The ring's pass is an all_to_all of which one chunk matters: the communicator has no
// wrap-around send/recv (neighbour_exchange is an all_to_all on every backend), so on n members it copies
// n times the bytes a point-to-point would.
//   bench_attention_ring_vs_gather [--repeats 5] [--lengths 200,1024,4096]
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>

#include "bench/bench_util.hpp"
#include "core/comm/communicator.hpp"
#include "core/comm/tensor_view.hpp"
#include "core/device.hpp"
#include "core/kernels/copy/copy.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/ops.hpp"
#include "core/random.hpp"

using namespace dtrain;

namespace {

constexpr int64_t kHeads = 2, kKeyDim = 32, kTokensPerBatch = 6400;  // the config's 32 x 200 tokens a step

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = uniform_at(seed_key(int64_t(seed), 0), 0, uint64_t(i)) - 0.5f;
  return t;
}

// [a, b, c, d] -> [a, c, b, d] with the copy kernel (as the product's attention packs its operands).
Tensor swap_middle_axes(const Tensor& x) {
  const Shape& s = x.shape();
  Tensor out = Tensor::uninitialized({s[0], s[2], s[1], s[3]}, x.place());
  kernels::BlockCopy block;
  block.rank = 4;
  const int64_t extent[4] = {s[0], s[2], s[1], s[3]};
  const int64_t src[4] = {s[1] * s[2] * s[3], s[3], s[2] * s[3], 1};
  const int64_t dst[4] = {s[2] * s[1] * s[3], s[1] * s[3], s[3], 1};
  for (int i = 0; i < 4; ++i) block.extent[i] = extent[i], block.src_stride[i] = src[i], block.dst_stride[i] = dst[i];
  kernels::kernels_for<kernels::CopyKernels>(x.place(), "ring").copy_block(x.buffer(), out.buffer(), block, false);
  return out;
}

// For each of `pairs` packed blocks: c = alpha op(a) op(b) + beta c.
void batched_gemm(const Tensor& a, const Tensor& b, Tensor& c, int64_t pairs, bool trans_a, bool trans_b, int64_t m,
                  int64_t n, int64_t k, float alpha, float beta) {
  const auto& gemm = kernels::kernels_for<kernels::GemmKernels>(c.place(), "ring");
  for (int64_t p = 0; p < pairs; ++p)
    gemm.gemm(trans_a, trans_b, m, n, k, alpha, a.buffer() + p * m * k, b.buffer() + p * k * n, beta,
              c.buffer() + p * m * n);
}

// What member i holds goes to member i + 1 (mod n) of `group`; `parts` are replaced by what member i - 1 held.
void ring_pass(const Group& group, std::initializer_list<Tensor*> parts, bool communicate) {
  if (!communicate || group.size() == 1) return;
  int64_t count = 0;
  for (const Tensor* part : parts) count += part->size();
  const int n = group.size(), next = (group.index + 1) % n, previous = (group.index + n - 1) % n;
  Tensor send = Tensor::uninitialized({n * count}), recv = Tensor::uninitialized({n * count});
  int64_t at = next * count;
  for (const Tensor* part : parts) {
    std::memcpy(send.buffer() + at, part->buffer(), size_t(part->size()) * sizeof(float));
    at += part->size();
  }
  current_device().comm->all_to_all(group, view_of(send), view_of(recv));
  at = previous * count;
  for (Tensor* part : parts) {
    std::memcpy(part->buffer(), recv.buffer() + at, size_t(part->size()) * sizeof(float));
    at += part->size();
  }
}

// Ring attention as an autograd op: q, k, v [B,T,H,K] all in q's layout (sequence sharded on `seq_dim`,
// features whole); no mask, no dropout. `communicate` false skips the passes (each shard attends to its own
// chunk n times: the compute of the ring without its transport, for timing only).
Var ring_attention(const Var& q, const Var& k, const Var& v, float scale, int seq_dim, bool communicate) {
  const Layout layout = q.value().layout();
  const Group& group = current_device().group_along(seq_dim);
  const int n = group.size();
  const Tensor qp = swap_middle_axes(q.value().local());
  const Tensor own_k = swap_middle_axes(k.value().local()), own_v = swap_middle_axes(v.value().local());
  const int64_t batch = qp.dim(0), heads = qp.dim(1), length = qp.dim(2), key_dim = qp.dim(3);
  const int64_t value_dim = own_v.dim(3), pairs = batch * heads, rows = pairs * length;
  const Place place = qp.place();
  const auto& row_kernels = kernels::kernels_for<kernels::RowKernels>(place, "ring");

  Tensor out({pairs, length, value_dim}), max_so_far({rows}, -std::numeric_limits<float>::infinity()), sum({rows});
  Tensor scores = Tensor::uninitialized({pairs, length, length}), block_max = Tensor::uninitialized({rows});
  Tensor new_max = Tensor::uninitialized({rows}), block_sum = Tensor::uninitialized({rows});
  Tensor kp = own_k.clone(), vp = own_v.clone();
  for (int step = 0; step < n; ++step) {
    batched_gemm(qp, kp, scores, pairs, false, true, length, length, key_dim, scale, 0.0f);
    row_kernels.row_max(scores.buffer(), rows, length, block_max.buffer());
    for (int64_t r = 0; r < rows; ++r) new_max[r] = std::max(max_so_far[r], block_max[r]);
    row_kernels.exponentials(scores.buffer(), new_max.buffer(), rows, length, scores.buffer(), block_sum.buffer());
    // The running sums and outputs were relative to the old maxima: rescale them to the new ones.
    for (int64_t r = 0; r < rows; ++r) {
      const float correction = std::exp(max_so_far[r] - new_max[r]);  // 0 on the first block (-inf)
      sum[r] = sum[r] * correction + block_sum[r];
      float* row = out.buffer() + r * value_dim;
      for (int64_t c = 0; c < value_dim; ++c) row[c] *= correction;
      max_so_far[r] = new_max[r];
    }
    batched_gemm(scores, vp, out, pairs, false, false, length, value_dim, length, 1.0f, 1.0f);
    if (step + 1 < n) ring_pass(group, {&kp, &vp}, communicate);
  }
  row_kernels.divide_rows(out.buffer(), sum.buffer(), rows, value_dim, out.buffer());
  Tensor log_sum_exp({rows});
  for (int64_t r = 0; r < rows; ++r) log_sum_exp[r] = max_so_far[r] + std::log(sum[r]);

  const Shape global = q.value().global_shape();
  const Shape out_global{global[0], global[1], global[2], v.value().global_shape()[3]};
  DTensor output(out_global, layout, swap_middle_axes(out.reshaped({batch, heads, length, value_dim})));
  const DTensor k_value = k.value(), v_value = v.value();
  return record("ring_attention", std::move(output), {q, k, v}, [=](const DTensor& grad) -> Gradients {
    const Group& group = current_device().group_along(seq_dim);
    const auto& row_kernels = kernels::kernels_for<kernels::RowKernels>(place, "ring");
    const Tensor gp = swap_middle_axes(grad.local());  // [B,H,T,V]
    Tensor dot = Tensor::uninitialized({rows});
    row_kernels.row_dot(gp.buffer(), out.buffer(), rows, value_dim, dot.buffer());
    Tensor dq({batch, heads, length, key_dim}), dk({batch, heads, length, key_dim}), dv({batch, heads, length, value_dim});
    Tensor kp = own_k.clone(), vp = own_v.clone();
    Tensor p = Tensor::uninitialized({pairs, length, length}), dp = Tensor::uninitialized({pairs, length, length});
    Tensor unused = Tensor::uninitialized({rows});
    for (int step = 0; step < n; ++step) {
      batched_gemm(qp, kp, p, pairs, false, true, length, length, key_dim, scale, 0.0f);
      row_kernels.exponentials(p.buffer(), log_sum_exp.buffer(), rows, length, p.buffer(), unused.buffer());
      batched_gemm(p, gp, dv, pairs, true, false, length, value_dim, length, 1.0f, 1.0f);
      batched_gemm(gp, vp, dp, pairs, false, true, length, length, value_dim, 1.0f, 0.0f);
      row_kernels.softmax_grad(dp.buffer(), p.buffer(), dot.buffer(), rows, length, dp.buffer());
      batched_gemm(dp, kp, dq, pairs, false, false, length, key_dim, length, scale, 1.0f);
      batched_gemm(dp, qp, dk, pairs, true, false, length, key_dim, length, scale, 1.0f);
      // dK and dV travel with their chunk; one pass more than the keys brings them home.
      if (step + 1 < n) ring_pass(group, {&kp, &vp, &dk, &dv}, communicate);
      else ring_pass(group, {&dk, &dv}, communicate);
    }
    return {DTensor(global, layout, swap_middle_axes(dq)),
            DTensor(k_value.global_shape(), layout, swap_middle_axes(dk)),
            DTensor(v_value.global_shape(), layout, swap_middle_axes(dv))};
  });
}

std::string spec_of(const MeshPtr& mesh, const std::string& dim) {
  for (const auto& name : mesh->dim_names())
    if (name == dim) return dim;
  return kUnsharded;
}

std::string mesh_name(const MeshPtr& mesh) {
  std::string name;
  for (int d = 0; d < mesh->num_dims(); ++d)
    name += fmt::format("{}{}={}", d ? "," : "", mesh->dim_names()[size_t(d)], mesh->dim_sizes()[size_t(d)]);
  return name;
}

int dim_index(const MeshPtr& mesh, const std::string& dim) {
  for (int d = 0; d < mesh->num_dims(); ++d)
    if (mesh->dim_names()[size_t(d)] == dim) return d;
  return -1;
}

enum class Way { Gather, Ring, RingComputeOnly };

struct Case {
  MeshPtr mesh;
  int64_t batch, length;
  Tensor q, k, v, g;  // global [B,T,H,K]; g weights the output in the loss sum(out * g)
};

// One forward (and backward when `backward_too`) on every rank; `each` sees the rank's output and leaves.
template <class Each>
void run(const Case& c, Way way, bool backward_too, Each each) {
  const MeshPtr& mesh = c.mesh;
  const Layout layout({spec_of(mesh, "batch"), "seq", spec_of(mesh, "model"), kUnsharded}, mesh);
  const int seq_dim = dim_index(mesh, "seq");
  const float scale = 1.0f / std::sqrt(float(kKeyDim));
  run_spmd(mesh, [&](DeviceContext& device) {
    auto leaf = [&](const Tensor& host) {
      return Var(DTensor(host.shape(), layout, pack(host, layout, device.rank)), backward_too);
    };
    Var q = leaf(c.q), k = leaf(c.k), v = leaf(c.v);
    Var out;
    if (way == Way::Gather) {
      AttentionOptions options;
      options.scale = scale;
      out = attention(q, k, v, std::nullopt, options);
    } else {
      out = ring_attention(q, k, v, scale, seq_dim, way == Way::Ring);
    }
    if (backward_too) {
      const Var weights(DTensor(c.g.shape(), layout, pack(c.g, layout, device.rank)));
      backward(reduce_sum(multiply(out, weights), Axes{0, 1, 2, 3}));
    }
    each(device, out, q, k, v);
  });
}

double max_relative_difference(const Tensor& a, const Tensor& b) {
  double largest = 0, scale = 1e-3;
  for (int64_t i = 0; i < a.size(); ++i) scale = std::max(scale, double(std::fabs(a[i])));
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i])) / scale;
    largest = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(largest, d);
  }
  return largest;
}

// The ring against the gather on every rank: output and the three gradients. The largest relative difference.
double check(const Case& c) {
  std::mutex mutex;
  std::vector<std::vector<Tensor>> gathered(size_t(c.mesh->size()));
  run(c, Way::Gather, true, [&](DeviceContext& device, const Var& out, const Var& q, const Var& k, const Var& v) {
    std::lock_guard lock(mutex);
    gathered[size_t(device.rank)] = {out.value().local().clone(), q.grad().local().clone(), k.grad().local().clone(),
                                     v.grad().local().clone()};
  });
  double largest = 0;
  run(c, Way::Ring, true, [&](DeviceContext& device, const Var& out, const Var& q, const Var& k, const Var& v) {
    const Tensor* ring[4] = {&out.value().local(), &q.grad().local(), &k.grad().local(), &v.grad().local()};
    std::lock_guard lock(mutex);
    for (int i = 0; i < 4; ++i) largest = std::max(largest, max_relative_difference(gathered[size_t(device.rank)][size_t(i)], *ring[i]));
  });
  return largest;
}

double median_seconds(const Case& c, Way way, bool backward_too, int repeats) {
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = bench::Clock::now();
    run(c, way, backward_too, [](DeviceContext&, const Var&, const Var&, const Var&, const Var&) {});
    if (r > 0) times.push_back(bench::seconds_since(start));  // the first run warms the buffer pools
  }
  return bench::median(times);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::vector<int64_t> lengths{200, 1024, 4096};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--lengths")) {
      lengths.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');) lengths.push_back(std::stoll(item));
    }
  }
  const std::string cpu = cpu_name();
  const std::vector<MeshPtr> meshes{make_mesh({"seq"}, {2}), make_mesh({"seq"}, {4}),
                                    make_mesh({"batch", "model", "seq"}, {2, 2, 2})};
  bool all_equal = true;
  for (int64_t length : lengths) {
    const int64_t batch = std::max<int64_t>(2, kTokensPerBatch / length);
    const Shape shape{batch, length, kHeads, kKeyDim};
    const Case base{nullptr, batch, length, random_tensor(shape, 1), random_tensor(shape, 2), random_tensor(shape, 3),
                    random_tensor(shape, 4)};
    for (const MeshPtr& mesh : meshes) {
      Case c = base;
      c.mesh = mesh;
      const double difference = check(c);
      const bool equal = difference <= 2e-5;
      all_equal = all_equal && equal;
      const double gather_forward = median_seconds(c, Way::Gather, false, repeats);
      const double ring_forward = median_seconds(c, Way::Ring, false, repeats);
      const double gather_step = median_seconds(c, Way::Gather, true, repeats);
      const double ring_step = median_seconds(c, Way::Ring, true, repeats);
      const double ring_compute = median_seconds(c, Way::RingComputeOnly, true, repeats);
      fmt::print("{{\"name\": \"attention ring vs gather [{},{},{},{}] mesh={}\", \"cpu\": \"{}\", "
                 "\"seconds\": {:.6f}, \"forward_seconds\": {:.6f}, \"peer_seconds\": {:.6f}, "
                 "\"peer_forward_seconds\": {:.6f}, \"ring_compute_only_seconds\": {:.6f}, \"ratio\": {:.3f}, "
                 "\"max_relative_difference\": {:.3g}, \"equal\": {}}}\n",
                 batch, length, kHeads, kKeyDim, mesh_name(mesh), cpu, gather_step, gather_forward, ring_step,
                 ring_forward, ring_compute, ring_step / gather_step, difference, equal);
      std::fflush(stdout);
    }
  }
  if (!all_equal) fmt::print(stderr, "bench_attention_ring_vs_gather: the ring's result differs from the gather's\n");
  return all_equal ? 0 : 1;
}

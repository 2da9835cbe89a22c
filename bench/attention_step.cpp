// Where a multi-head attention layer's training step goes, at the sizes of Keras' IMDB transformer example
// (batch 32, 200 tokens, 32 features, 2 heads, key_dim 32): the four projections (contract, forward and
// backward), the attention core (scores, mask, softmax, dropout, weighted values; forward and backward) and
// the whole layer, on one device and on the meshes given (the heads on `model`, the sequence on `seq`, the
// batch on `batch`, where the mesh has them). One JSON line per case: the median of --repeats steps.
//   bench_attention_step [--repeats 7] [--causal 1]
#include <cstring>
#include <mutex>
#include <string>

#include "bench/bench_util.hpp"
#include "core/device.hpp"
#include "core/nn/layers.hpp"
#include "core/ops/attention.hpp"
#include "core/ops/ops.hpp"
#include "core/random.hpp"

using namespace dtrain;

namespace {

constexpr int64_t kBatch = 32, kLength = 200, kFeatures = 32, kHeads = 2, kKeyDim = 32;

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = uniform_at(seed_key(int64_t(seed), 0), 0, uint64_t(i)) - 0.5f;
  return t;
}

std::string spec_of(const MeshPtr& mesh, const std::string& dim) {
  for (const auto& name : mesh->dim_names())
    if (name == dim) return dim;
  return kUnsharded;
}

// Median seconds of `repeats` runs of `part` (forward and backward) on every rank of `mesh`.
template <class Part>
double time_part(const MeshPtr& mesh, int repeats, Part part) {
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = bench::Clock::now();
    run_spmd(mesh, [&](DeviceContext& device) { part(device); });
    if (r > 0) times.push_back(bench::seconds_since(start));  // the first run warms the buffer pools
  }
  return bench::median(times);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7;
  bool causal = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--causal")) causal = std::stoi(argv[i + 1]) != 0;
  }
  const Tensor x_host = random_tensor({kBatch, kLength, kFeatures}, 1);
  const Tensor w_host = random_tensor({kFeatures, kHeads, kKeyDim}, 2), wo_host = random_tensor({kHeads, kKeyDim, kFeatures}, 3);
  const std::vector<MeshPtr> meshes{make_mesh({"batch"}, {1}), make_mesh({"model"}, {2}), make_mesh({"seq"}, {2}),
                                    make_mesh({"batch", "model", "seq"}, {2, 2, 2})};
  for (const MeshPtr& mesh : meshes) {
    const std::string b = spec_of(mesh, "batch"), m = spec_of(mesh, "model"), s = spec_of(mesh, "seq");
    const Layout x_layout({b, s, kUnsharded}, mesh), w_layout({kUnsharded, m, kUnsharded}, mesh);
    const Layout wo_layout({m, kUnsharded, kUnsharded}, mesh);
    auto leaf = [](const Tensor& host, const Layout& layout, int rank) {
      return Var(DTensor(host.shape(), layout, pack(host, layout, rank)), true);
    };
    auto sum_all = [](const Var& y) {
      Axes axes;
      for (int a = 0; a < y.value().rank(); ++a) axes.push_back(a);
      return reduce_sum(y, axes);
    };
    AttentionOptions options;
    options.scale = 1.0f / std::sqrt(float(kKeyDim));
    options.causal = causal;
    options.dropout = 0.1f;
    options.zero_masked = true;
    const double projections = time_part(mesh, repeats, [&](DeviceContext& device) {
      Var x = leaf(x_host, x_layout, device.rank), w = leaf(w_host, w_layout, device.rank);
      Var wo = leaf(wo_host, wo_layout, device.rank);
      Var q = contract(x, w, 1), k = contract(x, w, 1), v = contract(x, w, 1);
      backward(sum_all(add(add(contract(q, wo, 2), contract(k, wo, 2)), contract(v, wo, 2))));
    });
    const Layout heads_layout({b, s, m, kUnsharded}, mesh);
    const Tensor q_host = random_tensor({kBatch, kLength, kHeads, kKeyDim}, 4);
    const double core = time_part(mesh, repeats, [&](DeviceContext& device) {
      Var q = leaf(q_host, heads_layout, device.rank), k = leaf(q_host, heads_layout, device.rank);
      Var v = leaf(q_host, heads_layout, device.rank);
      backward(sum_all(attention(q, k, v, std::nullopt, options)));
    });
    const double layer = time_part(mesh, repeats, [&](DeviceContext& device) {
      nn::Parameters params;
      for (const char* sub : {"query", "key", "value"}) params.add(fmt::format("mha/{}/kernel", sub), leaf(w_host, w_layout, device.rank));
      params.add("mha/attention_output/kernel", leaf(wo_host, wo_layout, device.rank));
      nn::MultiHeadAttention::Options mha;
      mha.num_heads = kHeads, mha.key_dim = kKeyDim, mha.dropout = 0.1f, mha.causal = causal, mha.use_bias = false;
      nn::ForwardContext context{params, true, 1};
      Var x = leaf(x_host, x_layout, device.rank);
      backward(sum_all(nn::MultiHeadAttention("mha", mha).forward(x, context)));
    });
    fmt::print("{{\"name\": \"attention step [{},{},{}] heads={} key_dim={} causal={} mesh={}\", \"seconds\": {:.6f}, "
               "\"projections_seconds\": {:.6f}, \"attention_core_seconds\": {:.6f}}}\n",
               kBatch, kLength, kFeatures, kHeads, kKeyDim, causal, mesh->to_string(), layer, projections, core);
  }
  return 0;
}

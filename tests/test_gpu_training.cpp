// mesh.devices: gpu. On every machine: which GPU each rank gets (a pure function), the config errors where no GPU
// can run (exit 2 at mesh.devices), the step totals and accuracy count the GPU loop uses, and that the CPU path
// is the one it was. On a GPU ("needs a GPU: ..."; SKIPPED without one): training matches the CPU's per-step
// losses over several meshes, checkpoints move CPU -> GPU -> CPU bitwise, and ops agree with the CPU's.
#include <doctest/doctest.h>

#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>

#include "app/config.hpp"
#include "engine/model_builder.hpp"
#include "core/device.hpp"
#include "core/gpu_assignment.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/elementwise/elementwise.hpp"
#include "core/kernels/gemm/gemm.hpp"
#include "core/kernels/metrics/metrics.hpp"
#include "core/ops/ops.hpp"
#include "core/train/step_totals.hpp"
#include "tests/checkpoint_fixture.hpp"
#include "tests/config_errors.hpp"
#include "tests/training_fixture.hpp"

namespace dtrain {
namespace {

using testing::contains;

bool no_gpu() {
  if (kernels::cuda_device_count() > 0) return false;
  MESSAGE("skipped: no GPU");
  return true;
}

// Sets an environment variable for the scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const char* const kGpuConfig = R"(mesh:
  dims: {batch: 2}
  devices: gpu
data:
  dataset: mnist
  path: data/mnist
  batch_size: 8
  image_shape: flat
model:
  - {dense: 10}
train:
  epochs: 1
  loss: {sparse_softmax_cross_entropy: {reduction: mean}}
  optimizer: {sgd: {learning_rate: 0.1}}
)";

TEST_CASE("rank i of a process runs on cuda:((process_on_node * local + i) % visible)") {
  CHECK(gpus_for_ranks(8, 1, 0) == std::vector<int>(8, 0));             // a whole mesh on a 1-GPU machine
  CHECK(gpus_for_ranks(4, 2, 0) == std::vector<int>{0, 1, 0, 1});        // more ranks than GPUs: shared
  CHECK(gpus_for_ranks(2, 8, 0) == std::vector<int>{0, 1});
  CHECK(gpus_for_ranks(2, 4, 1) == std::vector<int>{2, 3});              // the node's second process
  for (int process = 0; process < 6; ++process)                          // mpirun, one rank per process
    CHECK(gpus_for_ranks(1, 4, process) == std::vector<int>{process % 4});
  CHECK(gpus_for_ranks(0, 4, 3).empty());
  CHECK_THROWS_AS(gpus_for_ranks(2, 0, 0), UsageError);
}

TEST_CASE("a process's index on its node comes from the launcher's environment") {
  const ScopedEnv open_mpi("OMPI_COMM_WORLD_LOCAL_RANK", nullptr), mpich("MPI_LOCALRANKID", nullptr),
      pmi("PMI_LOCAL_RANK", nullptr), slurm("SLURM_LOCALID", nullptr);
  CHECK(process_on_node() == 0);
  {
    const ScopedEnv set("SLURM_LOCALID", "2");
    CHECK(process_on_node() == 2);
    const ScopedEnv first("OMPI_COMM_WORLD_LOCAL_RANK", "3");  // Open MPI's is asked first
    CHECK(process_on_node() == 3);
  }
  const ScopedEnv junk("MPI_LOCALRANKID", "x1");
  CHECK(process_on_node() == 0);
}

TEST_CASE("devices: gpu without CUDA or without a GPU is a config error at mesh.devices") {
  CHECK(devices_unavailable(Place::Kind::Cpu).empty());
  const Config config = parse_config(kGpuConfig, "t.yaml", testing::no_path_check());
  CHECK(train_options(config).devices == Place::Kind::Cuda);
  if (kernels::cuda_device_count() > 0) {
    CHECK(devices_unavailable(Place::Kind::Cuda).empty());
    CHECK(build_mesh(config)->size() == 2);
    return;
  }
  const std::string why = devices_unavailable(Place::Kind::Cuda);
  CHECK(why == (kernels::cuda_built() ? "devices: gpu, but no CUDA device is visible"
                                      : "devices: gpu, but this dtrain was built without CUDA"));
  std::string message;
  try {
    build_mesh(config);
  } catch (const UsageError& error) {
    message = error.what();
  }
  CAPTURE(message);
  CHECK(message.rfind(testing::position("t.yaml", kGpuConfig, "gpu") + ": " + why, 0) == 0);
  CHECK(contains(message, "use devices: cpu"));
  // The engine below the app refuses as well, before any rank runs.
  bool ran = false;
  CHECK_THROWS_AS(run_spmd_in_process_on(make_mesh({"batch"}, {2}), Place::Kind::Cuda, [&](DeviceContext&) { ran = true; }),
                  UsageError);
  CHECK_FALSE(ran);
}

TEST_CASE("CPU ranks keep the CPU place and no CUDA stream") {
  std::mutex mutex;
  std::vector<Place> places;
  run_spmd_in_process_on(make_mesh({"batch", "model"}, {2, 2}), Place::Kind::Cpu, [&](DeviceContext& device) {
    std::lock_guard lock(mutex);
    places.push_back(device.place);
  });
  CHECK(places == std::vector<Place>(4, Place::cpu()));
  CHECK(train_options(parse_config(testing::replace(kGpuConfig, "devices: gpu", "devices: cpu"), "t.yaml",
                                   testing::no_path_check()))
            .devices == Place::Kind::Cpu);
}

TEST_CASE("step totals come back in order, once per take") {
  train::StepTotals totals(Place::cpu());
  CHECK(totals.empty());
  CHECK(totals.take().empty());
  for (int i = 0; i < 5; ++i) totals.push(Tensor::from_vector({2}, {float(i) + 0.5f, float(i)}));
  const auto pairs = totals.take();
  REQUIRE(pairs.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(pairs[size_t(i)] == std::array<double, 2>{i + 0.5, double(i)});
  CHECK(totals.empty());
  for (int64_t i = 0; i < train::StepTotals::kCapacity; ++i) totals.push(Tensor::from_vector({2}, {1, 1}));
  CHECK(totals.full());
  CHECK_THROWS_AS(totals.push(Tensor::from_vector({2}, {1, 1})), Error);
  CHECK(totals.take().size() == size_t(train::StepTotals::kCapacity));
  CHECK_THROWS_AS(totals.push(Tensor::from_vector({3}, {1, 1, 1})), Error);
}

TEST_CASE("the accuracy count: CPU kernels equal the reference and the hand count") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> predicted{0, 1, 2, 3, 4, 5, 6, 7, nan, 9}, truth{0, 1, 0, 3, 0, 5, 0, 7, nan, 0};
  // Equal pairs at 0, 1, 3, 5, 7 (NaN equals nothing): the count of the first n pairs, by hand.
  const std::vector<std::pair<int64_t, float>> expected{{0, 0.0f}, {1, 1.0f}, {4, 3.0f}, {10, 5.0f}};
  for (const auto& [n, count] : expected) {
    CAPTURE(n);
    float fast = -1, reference = -1;
    kernels::cpu_kernels<kernels::MetricKernels>().count_equal(predicted.data(), truth.data(), n, &fast);
    kernels::reference_kernels<kernels::MetricKernels>().count_equal(predicted.data(), truth.data(), n, &reference);
    CHECK(reference == count);
    CHECK(fast == count);
  }
}

TEST_CASE("needs a GPU: the accuracy count on the GPU equals the reference's") {
  if (no_gpu()) return;
  const Tensor predicted = testing::test_tensor({1000}, 1, 0.0f, 3.0f), truth = testing::test_tensor({1000}, 2, 0.0f, 3.0f);
  std::vector<float> p = predicted.to_vector(), t = truth.to_vector();
  for (auto* values : {&p, &t})
    for (float& v : *values) v = float(int(v));
  const Tensor gp = Tensor::from_vector({1000}, p).to(Place::cuda(0)), gt = Tensor::from_vector({1000}, t).to(Place::cuda(0));
  Tensor count = Tensor::uninitialized({1}, Place::cuda(0));
  kernels::kernels_for<kernels::MetricKernels>(Place::cuda(0), "test").count_equal(gp.buffer(), gt.buffer(), 1000,
                                                                                    count.buffer());
  float expected = 0;
  kernels::reference_kernels<kernels::MetricKernels>().count_equal(p.data(), t.data(), 1000, &expected);
  CHECK(expected > 0);  // the generated classes agree somewhere: a count of 0 would prove little
  CHECK(count.to(Place::cpu())[0] == expected);
}

// The per-step losses of a small MLP (the MNIST tutorial's shape, narrower) on generated images.
std::vector<double> mlp_losses(const std::string& mesh, const std::string& devices, int64_t steps) {
  static const data::Dataset images = testing::generated(64 * 12, 784, 10, false);
  return testing::step_losses("mnist_core_dp.yaml",
                              {"mesh.dims=" + mesh, "mesh.devices=" + devices, "data.batch_size=64",
                               "data.layout=[batch, unsharded]", "model.0.dense=64", "model.1.dense=32"},
                              images, steps);
}

TEST_CASE("needs a GPU: a small MLP trains on the GPU with the CPU's per-step losses on {1}, {batch: 2}, {batch: 2, model: 2}") {
  if (no_gpu()) return;
  const std::vector<double> cpu = mlp_losses("{batch: 1}", "cpu", 12);
  testing::check_learns(cpu, "cpu {batch: 1}");
  for (const std::string mesh : {"{batch: 1}", "{batch: 2}", "{batch: 2, model: 2}"}) {
    CAPTURE(mesh);
    testing::check_same_losses(cpu, mlp_losses(mesh, "gpu", 12), "gpu " + mesh);
  }
}

// A rank's state at a GPU, zeros: variables as make_state lays them out, updated whole (the GPU's way).
testing::RankModel gpu_state(const testing::MeshCase& mesh_case, const DeviceContext& device) {
  testing::RankModel state;
  for (const auto& def : testing::kVariables) {
    Layout layout(mesh_case.specs.count(def.path) ? mesh_case.specs.at(def.path)
                                                  : std::vector<std::string>(def.shape.size(), kUnsharded),
                  mesh_case.mesh);
    const Tensor local(layout.local_shape(def.shape), device.place);
    state.params.add(def.path, Var(DTensor(def.shape, layout, local), def.trainable));
  }
  state.optimizer = optim::make_adam({});
  state.optimizer->build(state.params, 1);
  return state;
}

TEST_CASE("needs a GPU: a checkpoint goes CPU -> GPU -> CPU bitwise, across meshes") {
  if (no_gpu()) return;
  const auto cases = testing::mesh_cases();
  testing::TempDir from_cpu("gpu_ckpt_cpu"), from_gpu("gpu_ckpt_gpu");
  testing::save_on(cases[2], from_cpu.str());  // {4,2} on the CPU
  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(from_cpu.str()));
  checkpoint::CheckpointManager manager(from_gpu.str(), 3, testing::test_context());
  run_spmd_in_process_on(cases[3].mesh, Place::Kind::Cuda, [&](DeviceContext& device) {  // {2,2,2} on the GPU
    testing::RankModel state = gpu_state(cases[3], device);
    train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
    checkpoint::restore(index, rank_state, true);
    for (const auto& named : checkpoint::variable_tensors(state.params))
      CHECK(named.tensor->local().place() == device.place);
    manager.save(rank_state, false);
  });
  const auto expected = testing::restore_on(cases[1], from_cpu.str());  // {8} on the CPU
  const auto round_trip = testing::restore_on(cases[1], from_gpu.str());
  REQUIRE(expected.size() == round_trip.size());
  for (const auto& [name, value] : expected) {
    CAPTURE(name);
    REQUIRE(round_trip.count(name));
    CHECK(testing::bitwise_equal(value, round_trip.at(name)));
  }
}

// The global output and input gradients of op(inputs) on `mesh` with every rank at `devices`.
std::pair<Tensor, std::vector<Tensor>> run_op_on(Place::Kind devices, const MeshPtr& mesh, const std::vector<Tensor>& inputs,
                                                 const std::vector<Layout>& layouts, const testing::VarOp& op) {
  const int n = mesh->size();
  std::vector<Tensor> outs(static_cast<size_t>(n));
  std::vector<std::vector<Tensor>> grads(inputs.size(), std::vector<Tensor>(static_cast<size_t>(n)));
  std::optional<DTensor> meta;
  std::mutex mutex;
  run_spmd_in_process_on(mesh, devices, [&](DeviceContext& device) {
    std::vector<Var> vars;
    for (size_t i = 0; i < inputs.size(); ++i)
      vars.emplace_back(DTensor(inputs[i].shape(), layouts[i], pack(inputs[i], layouts[i], device.rank).to(device.place)),
                        true);
    Var out = op(vars);
    std::vector<int> axes;
    for (int a = 0; a < out.value().rank(); ++a) axes.push_back(a);
    backward(reduce_sum(out, axes));
    const DTensor resolved = resolve_partial(out.value());
    std::lock_guard lock(mutex);
    outs[size_t(device.rank)] = resolved.local().to(Place::cpu());
    if (!meta) meta = resolved;
    for (size_t i = 0; i < vars.size(); ++i)
      if (vars[i].has_grad()) grads[i][size_t(device.rank)] = resolve_partial(vars[i].grad()).local().to(Place::cpu());
  });
  std::vector<Tensor> global_grads;
  for (size_t i = 0; i < inputs.size(); ++i)
    global_grads.push_back(grads[i][0].size() > 0 ? unpack(inputs[i].shape(), layouts[i], grads[i]) : Tensor());
  return {unpack(meta->global_shape(), meta->layout(), outs), global_grads};
}

TEST_CASE("needs a GPU: matmul, relu, softmax and reductions on GPU ranks equal the CPU's (1e-5)") {
  if (no_gpu()) return;
  const MeshPtr mesh = make_mesh({"batch", "model"}, {2, 2});
  const std::string u = kUnsharded;
  const Tensor x = testing::test_tensor({8, 6}, 11), w = testing::test_tensor({6, 4}, 12);
  struct Case {
    std::string name;
    std::vector<Layout> layouts;
    testing::VarOp op;
  };
  const std::vector<Case> cases{
      {"matmul, batch x model", {Layout({"batch", u}, mesh), Layout({u, "model"}, mesh)},
       [](const std::vector<Var>& v) { return matmul(v[0], v[1]); }},
      {"matmul, contracting dim sharded", {Layout({"batch", "model"}, mesh), Layout({"model", u}, mesh)},
       [](const std::vector<Var>& v) { return matmul(v[0], v[1]); }},
      {"relu(matmul) + softmax", {Layout({"batch", u}, mesh), Layout({u, "model"}, mesh)},
       [](const std::vector<Var>& v) { return softmax(relu(matmul(v[0], v[1]))); }},
      {"reduce_sum over the batch", {Layout({"batch", u}, mesh), Layout({u, "model"}, mesh)},
       [](const std::vector<Var>& v) { return reduce_sum(matmul(v[0], v[1]), {0}); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const auto [cpu_out, cpu_grads] = run_op_on(Place::Kind::Cpu, mesh, {x, w}, c.layouts, c.op);
    const auto [gpu_out, gpu_grads] = run_op_on(Place::Kind::Cuda, mesh, {x, w}, c.layouts, c.op);
    std::string why;
    CHECK_MESSAGE(testing::close(gpu_out, cpu_out, 1e-5f, &why), why);
    for (size_t i = 0; i < cpu_grads.size(); ++i) {
      if (cpu_grads[i].size() == 0) continue;
      CHECK_MESSAGE(testing::close(gpu_grads[i], cpu_grads[i], 1e-5f, &why), why);
    }
  }
}

// train.precision bf16 on a GPU: products may take the bf16 tensor cores (cuBLAS's 32F_FAST_16BF allows them;
// cuBLAS picks them or its float32 kernels per shape). Either way, on operands that hold bf16 values the result
// is the exact product of them in float32, up to the order of float32 additions.
TEST_CASE("needs a GPU: bf16 products on the GPU are the CPU's products of the bf16-rounded operands") {
  if (no_gpu()) return;
  const int64_t m = 96, k = 784, n = 200;
  const Tensor a = testing::test_tensor({m, k}, 31, -1.0f, 1.0f), b = testing::test_tensor({k, n}, 32, -1.0f, 1.0f);
  const auto rounded = [](const Tensor& t) {
    Tensor out = Tensor::uninitialized(t.shape());
    kernels::reference_kernels<kernels::ElementwiseKernels>().unary(kernels::UnaryOp::RoundBf16, 0.0f, t.data(),
                                                                     out.data(), t.size());
    return out;
  };
  const auto cpu_product = [&](const Tensor& x, const Tensor& y) {
    Tensor c = Tensor::uninitialized({m, n});
    kernels::reference_kernels<kernels::GemmKernels>().gemm(false, false, m, n, k, 1.0f, x.data(), y.data(), 0.0f,
                                                            c.data());
    return c;
  };
  const auto gpu_bf16_product = [&](const Tensor& x, const Tensor& y) {
    const Place gpu = Place::cuda(0);
    const Tensor gx = x.to(gpu), gy = y.to(gpu);
    Tensor c = Tensor({m, n}, std::numeric_limits<float>::quiet_NaN()).to(gpu);  // every element written
    kernels::kernels_for<kernels::GemmKernels>(gpu, "test").gemm_bf16(false, false, m, n, k, 1.0f, gx.buffer(), k,
                                                                      gy.buffer(), 0.0f, c.buffer());
    return c.to(Place::cpu());
  };
  const Tensor exact = cpu_product(rounded(a), rounded(b));
  // 784 float32 additions of partial sums up to ~10, in another order (and the tensor cores' own): 1e-4. The
  // operands' bf16 rounding moves the products by ~3e-3, so a product of the unrounded values would fail.
  std::string why;
  CHECK_FALSE(testing::close(cpu_product(a, b), exact, 1e-4f, &why));
  CHECK_MESSAGE(testing::close(gpu_bf16_product(rounded(a), rounded(b)), exact, 1e-4f, &why), why);
}

}  // namespace
}  // namespace dtrain

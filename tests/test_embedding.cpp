// Embedding: the op and its gradient on every mesh and layout (the table sharded over its rows, its columns,
// both; the ids over batch and sequence) against one device; the table's gradient against finite differences;
// the CPU kernels bit for bit against the plain reference (repeated ids, a row shard, ids of other shards and
// no row at all); the CUDA kernels when a GPU is present.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/embedding/embedding.hpp"
#include "core/kernels/embedding/embedding_body.hpp"
#include "core/ops/embedding.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/device_buffers.hpp"

using namespace dtrain;
using namespace dtrain::testing;
using dtrain::kernels::EmbeddingKernels;

namespace {

using Values = std::vector<float>;

// Ids [batch, sequence] in [0, rows), with repeats (more ids than rows), so the gradient adds rows up.
Tensor test_ids(const Shape& shape, int64_t rows, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int64_t> pick(0, rows - 1);
  Tensor ids(shape);
  for (int64_t i = 0; i < ids.size(); ++i) ids[i] = float(pick(engine));
  return ids;
}

// Every mesh and every layout of ids and table against one device: output and the table's gradient. Returns
// the layouts of the table tried with its rows sharded, its columns sharded, and both.
struct Coverage {
  int cases = 0, rows_sharded = 0, columns_sharded = 0, both = 0;
};
Coverage check_equivalence(const std::string& name, const Tensor& ids, const Tensor& table, const VarOp& op) {
  MeshPtr single = make_mesh({"x"}, {1});
  const std::vector<Tensor> inputs{ids, table};
  const std::vector<Layout> whole{Layout::replicated(single, ids.rank()), Layout::replicated(single, 2)};
  Tensor probe = run_op(single, inputs, whole, op, Tensor(), false).output;
  Tensor cotangent = test_tensor(probe.shape(), 99);
  SpmdResult reference = run_op(single, inputs, whole, op, cotangent);
  REQUIRE(reference.grads[1].size() == table.size());
  Coverage coverage;
  for (const MeshPtr& mesh : test_meshes()) {
    for (const auto& layouts : layout_combinations(mesh, inputs)) {
      SpmdResult result = run_op(mesh, inputs, layouts, op, cotangent);
      ++coverage.cases;
      const bool rows = layouts[1].is_sharded(0), columns = layouts[1].is_sharded(1);
      coverage.rows_sharded += rows;
      coverage.columns_sharded += columns;
      coverage.both += rows && columns;
      std::string why, where = name + " on " + mesh->to_string() + " with ids " + layouts[0].specs_string() +
                                   " table " + layouts[1].specs_string();
      if (!close(result.output, reference.output, 1e-5f, &why)) {
        FAIL_CHECK(where << ": output " << why);
        return coverage;
      }
      if (!close(result.grads[1], reference.grads[1], 1e-5f, &why)) {
        FAIL_CHECK(where << ": table gradient " << why);
        return coverage;
      }
    }
  }
  MESSAGE(name << ": " << coverage.cases << " mesh/layout cases equal to one device");
  return coverage;
}

Var lookup(const std::vector<Var>& v) { return embedding(v[0].value(), v[1]); }

}  // namespace

TEST_CASE("embedding and its table gradient equal one device on every mesh and layout") {
  const Tensor ids = test_ids({8, 4}, 16, 1), table = test_tensor({16, 8}, 2);
  Coverage c = check_equivalence("embedding", ids, table, lookup);
  CHECK(c.rows_sharded > 0);
  CHECK(c.columns_sharded > 0);
  CHECK(c.both > 0);
  // The model's use: the mean over the sequence axis, then a dense layer (the partial sum over a row-sharded
  // table flows through both).
  check_equivalence("mean over the sequence of embedding", ids, table, [](const std::vector<Var>& v) {
    return reduce_mean(lookup(v), {1});
  });
  // One id per example (rank-1 ids).
  check_equivalence("embedding of [8] ids", test_ids({8}, 16, 3), table, lookup);
}

TEST_CASE("embedding: values and the scatter-add of the gradient, by hand") {
  MeshPtr single = make_mesh({"x"}, {1});
  const Tensor ids = Tensor::from_vector({1, 3}, {2, 0, 2});
  const Tensor table = Tensor::from_vector({3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor cotangent = Tensor::from_vector({1, 3, 2}, {1, 10, 100, 1000, 10000, 100000});
  SpmdResult r = run_op(single, {ids, table}, {Layout::replicated(single, 2), Layout::replicated(single, 2)}, lookup,
                        cotangent);
  CHECK(r.output.to_vector() == Values{5, 6, 1, 2, 5, 6});
  // Row 2 is looked up twice: its gradient is the sum of both output rows; row 1 none: zeros.
  CHECK(r.grads[1].to_vector() == Values{100, 1000, 0, 0, 10001, 100010});
}

TEST_CASE("embedding: the table gradient matches finite differences") {
  MeshPtr single = make_mesh({"x"}, {1});
  const Tensor ids = test_ids({3, 5}, 6, 4), table = test_tensor({6, 4}, 5);
  const std::vector<Layout> whole{Layout::replicated(single, 2), Layout::replicated(single, 2)};
  // A nonlinear use, so the check is not of a constant: loss = sum(mean_seq(e)^2 * w).
  VarOp op = [](const std::vector<Var>& v) {
    Var mean = reduce_mean(lookup(v), {1});
    return multiply(mean, mean);
  };
  Tensor probe = run_op(single, {ids, table}, whole, op, Tensor(), false).output;
  Tensor cotangent = test_tensor(probe.shape(), 42);
  SpmdResult analytic = run_op(single, {ids, table}, whole, op, cotangent);
  auto loss_of = [&](const Tensor& t) {
    Tensor out = run_op(single, {ids, t}, whole, op, Tensor(), false).output;
    double sum = 0;
    for (int64_t i = 0; i < out.size(); ++i) sum += double(out[i]) * cotangent[i];
    return sum;
  };
  const float step = 1e-2f;
  for (int64_t j = 0; j < table.size(); ++j) {
    Tensor plus = table.clone(), minus = table.clone();
    plus[j] += step;
    minus[j] -= step;
    const double numeric = (loss_of(plus) - loss_of(minus)) / (2.0 * step), exact = analytic.grads[1][j];
    INFO("d/d table[" << j << "] analytic " << exact << " numeric " << numeric);
    CHECK(std::fabs(numeric - exact) <= 2e-3 * std::max(1.0, std::fabs(numeric)));
  }
}

TEST_CASE("embedding op: an id that is no row of the table is an error naming it") {
  const MeshPtr mesh = make_mesh({"x"}, {1});
  for (const float bad : {4.0f, -1.0f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(bad);
    std::string message;
    run_spmd_in_process(mesh, [&](DeviceContext&) {
      const DTensor table({4, 2}, Layout::replicated(mesh, 2), Tensor({4, 2}, 0.5f));
      const DTensor ids({2}, Layout::replicated(mesh, 1), Tensor::from_vector({2}, {0.0f, bad}));
      try {
        ops::embedding(ids, table);
      } catch (const Error& e) {
        message = e.what();
      }
    });
    CHECK(message == fmt::format("[embedding] id {} out of range for a table of 4 rows", bad));
  }
}

namespace {

struct KernelCase {
  int64_t rows, columns, first_row, count;
};
// Empty, no ids, one row, a row shard starting at 5 (ids of other shards look up nothing), many repeats.
const std::vector<KernelCase> kCases = {{0, 4, 0, 6},  {3, 4, 0, 0},   {1, 1, 0, 5},
                                        {7, 3, 5, 40}, {16, 8, 0, 300}, {5, 0, 0, 9}};

// Ids over [0, first_row + rows + 3), and in every fifth place one that is no row number at all.
Values kernel_ids(const KernelCase& k, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int64_t> pick(0, k.first_row + k.rows + 2);
  const float bad[] = {-1.0f, 2.5f, 1e30f, std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity()};
  Values ids(size_t(k.count));
  for (int64_t i = 0; i < k.count; ++i) ids[size_t(i)] = i % 5 == 4 ? bad[(i / 5) % 5] : float(pick(engine));
  return ids;
}

Values random_values(int64_t count, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  Values values(static_cast<size_t>(count));
  for (float& x : values) x = uniform(engine);
  return values;
}

struct KernelOutputs {
  Values gathered, table_grad;
};

template <class Upload, class Download>
KernelOutputs run_kernels(const EmbeddingKernels& k, const KernelCase& c, uint32_t seed, Upload upload,
                          Download download) {
  auto table = upload(random_values(c.rows * c.columns, seed)), ids = upload(kernel_ids(c, seed + 1));
  auto grad = upload(random_values(c.count * c.columns, seed + 2));
  auto out = upload(Values(size_t(c.count * c.columns), 7.0f));
  auto table_grad = upload(Values(size_t(c.rows * c.columns), 7.0f));
  k.gather(table->get(), c.rows, c.columns, c.first_row, ids->get(), c.count, out->get());
  k.scatter_add(grad->get(), ids->get(), c.count, c.rows, c.columns, c.first_row, table_grad->get());
  return {download(out, c.count * c.columns), download(table_grad, c.rows * c.columns)};
}

struct HostBuffer {
  Values values;
  float* get() { return values.data(); }
};
KernelOutputs run_on_host(const EmbeddingKernels& k, const KernelCase& c, uint32_t seed) {
  auto upload = [](Values v) { return std::make_shared<HostBuffer>(HostBuffer{std::move(v)}); };
  auto download = [](const std::shared_ptr<HostBuffer>& b, int64_t) { return b->values; };
  return run_kernels(k, c, seed, upload, download);
}

void check_same_bits(const Values& actual, const Values& expected, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK_FALSE(std::isnan(actual[i]));
    CHECK(std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("embedding kernels: the CPU kernels give the reference's bits") {
  const EmbeddingKernels& cpu = kernels::cpu_kernels<EmbeddingKernels>();
  const EmbeddingKernels& reference = kernels::reference_kernels<EmbeddingKernels>();
  uint32_t seed = 1;
  for (const KernelCase& c : kCases) {
    CAPTURE(c.rows);
    CAPTURE(c.count);
    const KernelOutputs a = run_on_host(cpu, c, seed += 10), b = run_on_host(reference, c, seed);
    check_same_bits(a.gathered, b.gathered, "gather");
    check_same_bits(a.table_grad, b.table_grad, "scatter_add");
  }
}

TEST_CASE("embedding bodies: the row of an id in a shard") {
  using namespace dtrain::kernels;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  CHECK(embedding_row(5.0f, 3, 4) == 2);
  CHECK(embedding_row(3.0f, 3, 4) == 0);
  CHECK(embedding_row(7.0f, 3, 4) == -1);
  CHECK(embedding_row(2.0f, 3, 4) == -1);
  CHECK(embedding_row(4.5f, 3, 4) == -1);
  CHECK(embedding_row(-0.0f, 0, 4) == 0);
  for (const float bad : {-1.0f, nan, inf, -inf, 1e30f}) CHECK(embedding_row(bad, 0, 4) == -1);
  const float table[] = {1, 2, 3, 4};
  CHECK(gathered_at(table, 2, 2, 10, 11.0f, 1) == 4.0f);
  CHECK(gathered_at(table, 2, 2, 10, 12.0f, 1) == 0.0f);
  // Row 1 of a shard starting at 10 gets ids 11 at positions 0 and 2, in that order.
  const float ids[] = {11, 10, 11}, grad[] = {1, 2, 3, 4, 5, 6};
  float row[2] = {7, 7};
  accumulate_row(grad, ids, 3, 2, 2, 10, 1, row);
  CHECK(row[0] == 6.0f);
  CHECK(row[1] == 8.0f);
}

TEST_CASE("needs a GPU: the CUDA embedding kernels give the reference's bits") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  auto upload = [](const Values& v) { return dtrain::testing::upload(v); };
  auto download = [](const std::shared_ptr<dtrain::testing::DeviceValues>& b, int64_t count) {
    return dtrain::testing::download(b, count);
  };
  const EmbeddingKernels& gpu = cuda_kernels<EmbeddingKernels>(0, "test");
  const EmbeddingKernels& reference = reference_kernels<EmbeddingKernels>();
  uint32_t seed = 1;
  for (const KernelCase& c : kCases) {
    CAPTURE(c.rows);
    CAPTURE(c.count);
    // Selections and in-order sums of the same values: exact, and the same on every run (no atomics).
    const KernelOutputs a = run_kernels(gpu, c, seed += 10, upload, download), b = run_on_host(reference, c, seed);
    check_same_bits(a.gathered, b.gathered, "gather");
    check_same_bits(a.table_grad, b.table_grad, "scatter_add");
    const KernelOutputs again = run_kernels(gpu, c, seed, upload, download);
    check_same_bits(again.table_grad, a.table_grad, "scatter_add, second run");
  }
}

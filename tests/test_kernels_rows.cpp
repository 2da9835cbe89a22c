// Row kernels (softmax, cross-entropy, argmax rows) against the plain reference: the CPU kernels bit for bit
// on random blocks of several shapes (empty, one class, odd sizes, a class shard), bad labels matching no
// class, NaNs passed over by the row max, ties in argmax; the shared bodies on their own; the CUDA kernels
// when a GPU is present.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/rows/rows.hpp"
#include "core/kernels/rows/rows_body.hpp"
#include "core/ops/ops.hpp"
#include "tests/device_buffers.hpp"

namespace {

using dtrain::kernels::RowKernels;
using Values = std::vector<float>;

struct RowShape {
  int64_t rows, classes, first_class;
};
// Empty, one class, two classes (IMDB), ten (MNIST), odd sizes, a shard of classes starting at 7.
const std::vector<RowShape> kShapes = {{0, 0, 0}, {0, 5, 0}, {1, 1, 0},  {3, 10, 0},
                                       {17, 2, 0}, {5, 33, 7}, {64, 1000, 0}, {9, 3, 3}};

Values random_values(int64_t count, uint32_t seed, float low = -4.0f, float high = 4.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  Values values(static_cast<size_t>(count));
  for (float& v : values) v = uniform(engine);
  return values;
}

// Labels of the whole tensor (classes [0, total)), some in this shard and some not, and some no class at all.
Values random_labels(int64_t rows, int64_t total_classes, uint32_t seed, bool with_bad) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(total_classes - 1, 0));
  const float bad[] = {-1.0f, 2.5f, float(total_classes), 1e30f, -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
  Values labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = with_bad && r % 3 == 1 ? bad[(r / 3) % 6] : float(pick(engine));
  return labels;
}

// Same bits at every position, and never a NaN (every output here is a number).
void check_same_bits(const Values& actual, const Values& expected, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK_FALSE(std::isnan(actual[i]));
    CHECK(std::memcmp(&actual[i], &expected[i], sizeof(float)) == 0);
  }
}

// |actual - expected| <= tolerance * max(1, |expected|); fails on a NaN.
void check_close(const Values& actual, const Values& expected, float tolerance, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK(std::fabs(actual[i] - expected[i]) <= tolerance * std::max(1.0f, std::fabs(expected[i])));
  }
}

// Every output of every row kernel for one block, computed by `k` on host buffers (`run` moves them to and
// from the implementation's place).
struct RowOutputs {
  Values row_max, exp, row_sum, softmax, dot, softmax_grad, sums, loss, xent_grad, best, merged;
};

// The inputs: logits x (with NaNs in odd rows, which the row max passes over, when `with_nans`), an upstream
// gradient g, labels and per-row gradients, and `members` blocks of argmax winners with ties.
struct RowInputs {
  RowShape shape;
  Values x, g, labels, g_rows, winners;
  int members = 3;
};

RowInputs make_inputs(const RowShape& shape, uint32_t seed) {
  RowInputs in;
  in.shape = shape;
  const int64_t n = shape.rows * shape.classes;
  in.x = random_values(n, seed);
  // Repeated values in some rows: argmax takes the first of them.
  for (int64_t r = 0; r < shape.rows; r += 2)
    for (int64_t c = 1; c < shape.classes; c += 2) in.x[r * shape.classes + c] = in.x[r * shape.classes];
  in.g = random_values(n, seed + 1, -1.0f, 1.0f);
  in.labels = random_labels(shape.rows, shape.first_class + shape.classes + 2, seed + 2, true);
  in.g_rows = random_values(shape.rows, seed + 3, -1.0f, 1.0f);
  // members x rows (value, index) pairs; equal values in every other row, so ties go to the smaller index.
  in.winners.resize(size_t(in.members * shape.rows * 2));
  const Values values = random_values(in.members * shape.rows, seed + 4);
  for (int m = 0; m < in.members; ++m)
    for (int64_t r = 0; r < shape.rows; ++r) {
      in.winners[(m * shape.rows + r) * 2] = r % 2 == 0 ? 1.5f : values[m * shape.rows + r];
      in.winners[(m * shape.rows + r) * 2 + 1] = float((in.members - m) * 10 + r);
    }
  return in;
}

// Runs every kernel of `k` on `in`; buffers go through `upload` / `download` (identity on the CPU).
template <class Upload, class Download>
RowOutputs run_all(const RowKernels& k, const RowInputs& in, Upload upload, Download download) {
  const auto [rows, classes, first] = in.shape;
  const int64_t n = rows * classes;
  RowOutputs out;
  auto x = upload(in.x), g = upload(in.g), labels = upload(in.labels), g_rows = upload(in.g_rows);
  auto winners = upload(in.winners);
  auto row_max = upload(Values(size_t(rows))), e = upload(Values(size_t(n))), row_sum = upload(Values(size_t(rows)));
  k.row_max(x->get(), rows, classes, row_max->get());
  k.exponentials(x->get(), row_max->get(), rows, classes, e->get(), row_sum->get());
  out.row_max = download(row_max, rows);
  out.exp = download(e, n);
  out.row_sum = download(row_sum, rows);

  auto y = upload(Values(size_t(n)));
  k.divide_rows(e->get(), row_sum->get(), rows, classes, y->get());
  out.softmax = download(y, n);
  auto dot = upload(Values(size_t(rows))), dx = upload(Values(size_t(n)));
  k.row_dot(g->get(), y->get(), rows, classes, dot->get());
  k.softmax_grad(g->get(), y->get(), dot->get(), rows, classes, dx->get());
  out.dot = download(dot, rows);
  out.softmax_grad = download(dx, n);

  auto sums = upload(Values(size_t(2 * rows), 7.0f)), loss = upload(Values(size_t(rows)));
  k.gather_label_logits(x->get(), row_sum->get(), labels->get(), rows, classes, first, sums->get());
  k.cross_entropy_loss(sums->get(), row_max->get(), rows, loss->get());
  k.cross_entropy_grad(y->get(), labels->get(), g_rows->get(), rows, classes, first, dx->get());
  out.sums = download(sums, 2 * rows);
  out.loss = download(loss, rows);
  out.xent_grad = download(dx, n);

  if (classes > 0) {  // argmax needs a class per row
    auto best = upload(Values(size_t(2 * rows)));
    k.argmax_local(x->get(), rows, classes, first, best->get());
    out.best = download(best, 2 * rows);
  }
  auto merged = upload(Values(size_t(rows)));
  k.argmax_merge(winners->get(), in.members, rows, merged->get());
  out.merged = download(merged, rows);
  return out;
}

// Host "uploads": the buffers stay where they are.
struct HostBuffer {
  Values values;
  float* get() { return values.data(); }
};
RowOutputs run_on_host(const RowKernels& k, const RowInputs& in) {
  auto upload = [](Values v) { return std::make_shared<HostBuffer>(HostBuffer{std::move(v)}); };
  auto download = [](const std::shared_ptr<HostBuffer>& b, int64_t) { return b->values; };
  return run_all(k, in, upload, download);
}

}  // namespace

TEST_CASE("row kernels: the CPU kernels give the reference's bits") {
  const RowKernels& cpu = dtrain::kernels::cpu_kernels<RowKernels>();
  const RowKernels& reference = dtrain::kernels::reference_kernels<RowKernels>();
  uint32_t seed = 1;
  for (const RowShape& shape : kShapes) {
    CAPTURE(shape.rows);
    CAPTURE(shape.classes);
    const RowInputs in = make_inputs(shape, seed += 10);
    const RowOutputs a = run_on_host(cpu, in), b = run_on_host(reference, in);
    check_same_bits(a.row_max, b.row_max, "row_max");
    check_same_bits(a.exp, b.exp, "exp");
    check_same_bits(a.row_sum, b.row_sum, "row_sum");
    check_same_bits(a.softmax, b.softmax, "softmax");
    check_same_bits(a.dot, b.dot, "dot");
    check_same_bits(a.softmax_grad, b.softmax_grad, "softmax_grad");
    check_same_bits(a.sums, b.sums, "label sums");
    check_same_bits(a.loss, b.loss, "loss");
    check_same_bits(a.xent_grad, b.xent_grad, "cross-entropy grad");
    check_same_bits(a.best, b.best, "argmax winners");
    check_same_bits(a.merged, b.merged, "merged argmax");
    // A softmax row sums to 1; the winners of tied rows are the first columns.
    for (int64_t r = 0; r < shape.rows && shape.classes > 0; ++r) {
      float total = 0.0f;
      for (int64_t c = 0; c < shape.classes; ++c) total += a.softmax[r * shape.classes + c];
      CHECK(std::fabs(total - 1.0f) < 1e-4f);
    }
    for (int64_t r = 0; r < shape.rows; r += 2) CHECK(a.merged[r] == float(10 + r));  // tied: the smallest index
  }
}

TEST_CASE("row kernels: a label outside the block, or no class at all, gathers no logit") {
  const RowKernels& cpu = dtrain::kernels::cpu_kernels<RowKernels>();
  // Two rows of three classes, the shard [3, 6): labels 4 (column 1), 1 (another shard), and bad ones.
  const Values x = {1, 2, 3, 4, 5, 6}, row_sum = {10, 20};
  for (const float bad : {-1.0f, 4.5f, 6.0f, 1e30f, std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(bad);
    const Values labels = {4.0f, bad};
    Values sums(4, 9.0f), dx(6);
    cpu.gather_label_logits(x.data(), row_sum.data(), labels.data(), 2, 3, 3, sums.data());
    check_same_bits(sums, {10, 20, 2, 0}, "sums");
    const Values p = {0.5f, 0.25f, 0.25f, 0.5f, 0.25f, 0.25f}, g = {2.0f, 4.0f};
    cpu.cross_entropy_grad(p.data(), labels.data(), g.data(), 2, 3, 3, dx.data());
    check_same_bits(dx, {1.0f, -1.5f, 0.5f, 2.0f, 1.0f, 1.0f}, "cross-entropy grad");
  }
}

TEST_CASE("row bodies: the per-row and per-element arithmetic the GPU runs") {
  using namespace dtrain::kernels;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // The row max passes NaNs over, as std::max does; no classes leave the initial value.
  const float with_nans[] = {nan, 1.0f, nan, 3.0f, 2.0f};
  CHECK(row_max_of(with_nans, 5, -inf) == 3.0f);
  CHECK(row_max_of(with_nans, 0, -inf) == -inf);
  // exp(x - max), summed in order.
  const float row[] = {0.0f, 1.0f, -1.0f};
  float e[3];
  const float sum = exponentials_of(row, 1.0f, 3, e);
  CHECK(e[1] == 1.0f);
  CHECK(e[0] == std::exp(-1.0f));
  CHECK(sum == (std::exp(-1.0f) + 1.0f) + std::exp(-2.0f));
  const float g[] = {1.0f, 2.0f, 3.0f}, y[] = {0.5f, 0.25f, 0.25f};
  CHECK(row_dot_of(g, y, 3) == 1.75f);
  CHECK(softmax_grad_at(3.0f, 0.25f, 1.75f) == 0.3125f);
  // Labels: whole numbers inside the shard [first, first + classes) only.
  CHECK(label_column(5.0f, 3, 4) == 2);
  CHECK(label_column(3.0f, 3, 4) == 0);
  CHECK(label_column(7.0f, 3, 4) == -1);
  CHECK(label_column(2.0f, 3, 4) == -1);
  CHECK(label_column(4.5f, 3, 4) == -1);
  CHECK(label_column(-0.0f, 0, 4) == 0);
  for (const float bad : {-1.0f, nan, inf, -inf, 1e30f}) CHECK(label_column(bad, 0, 4) == -1);
  CHECK(cross_entropy_loss_of(std::exp(2.0f), 1.0f, 0.5f) == std::log(std::exp(2.0f)) + 1.0f - 0.5f);
  CHECK(cross_entropy_grad_at(2.0f, 0.25f, true) == -1.5f);
  CHECK(cross_entropy_grad_at(2.0f, 0.25f, false) == 0.5f);
  // argmax: the first of equal maxima; a NaN after the first column never wins.
  const float tied[] = {1.0f, 3.0f, nan, 3.0f};
  CHECK(argmax_column(tied, 4) == 1);
  CHECK(argmax_column(tied, 1) == 0);
  // Merging members' (value, index): the larger value, a tie to the smaller index.
  const float pairs[] = {2.0f, 7.0f, 9.0f, 1.0f, 5.0f, 3.0f, 5.0f, 2.0f};  // stride 4: members (2,7), (5,3)
  CHECK(merged_argmax(pairs, 2, 4) == 3.0f);
  const float tie[] = {5.0f, 7.0f, 5.0f, 3.0f, 5.0f, 4.0f};
  CHECK(merged_argmax(tie, 3, 2) == 3.0f);
  CHECK(merged_argmax(tie, 1, 2) == 7.0f);
}

TEST_CASE("needs a GPU: the CUDA row kernels match the reference") {
  using namespace dtrain::kernels;
  if (cuda_device_count() == 0) {
    MESSAGE("skipped: no GPU");
    return;
  }
  auto upload = [](const Values& v) { return dtrain::testing::upload(v); };
  auto download = [](const std::shared_ptr<dtrain::testing::DeviceValues>& b, int64_t count) {
    return dtrain::testing::download(b, count);
  };
  const RowKernels& gpu = cuda_kernels<RowKernels>(0, "test");
  const RowKernels& reference = reference_kernels<RowKernels>();
  uint32_t seed = 1;
  for (const RowShape& shape : kShapes) {
    CAPTURE(shape.rows);
    CAPTURE(shape.classes);
    const RowInputs in = make_inputs(shape, seed += 10);
    const RowOutputs a = run_all(gpu, in, upload, download), b = run_on_host(reference, in);
    // Searches, selections, and single IEEE operations are exact; exp and log may differ by an ulp or two,
    // and a contracted multiply-add rounds once instead of twice.
    check_same_bits(a.row_max, b.row_max, "row_max");
    check_close(a.exp, b.exp, 1e-6f, "exp");
    check_close(a.row_sum, b.row_sum, 1e-5f, "row_sum");
    check_close(a.softmax, b.softmax, 1e-5f, "softmax");
    check_close(a.dot, b.dot, 1e-5f, "dot");
    check_close(a.softmax_grad, b.softmax_grad, 1e-5f, "softmax_grad");
    check_close(a.sums, b.sums, 1e-5f, "label sums");
    check_close(a.loss, b.loss, 1e-5f, "loss");
    check_close(a.xent_grad, b.xent_grad, 1e-5f, "cross-entropy grad");
    check_same_bits(a.best, b.best, "argmax winners");
    check_same_bits(a.merged, b.merged, "merged argmax");
  }
}

TEST_CASE("cross-entropy op: a label on the host that is no class is an error naming it") {
  using namespace dtrain;
  const MeshPtr mesh = make_mesh({"x"}, {1});
  for (const float bad : {3.0f, -1.0f, 1.5f}) {
    CAPTURE(bad);
    std::string message;
    run_spmd_in_process(mesh, [&](DeviceContext&) {
      const DTensor logits({2, 3}, Layout::replicated(mesh, 2), Tensor({2, 3}, 0.5f));
      const DTensor labels({2}, Layout::replicated(mesh, 1), Tensor::from_vector({2}, {0.0f, bad}));
      try {
        ops::sparse_softmax_cross_entropy(logits, labels);
      } catch (const Error& e) {
        message = e.what();
      }
    });
    CHECK(message == fmt::format("[sparse_softmax_cross_entropy] label {} out of range for 3 classes", bad));
  }
}

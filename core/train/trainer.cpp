#include "core/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>

#include "core/bitwise.hpp"
#include "core/comm/mpi/hierarchical.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/comm/tracing.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/kernels/gemm/gemm_engine.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/kernels/metrics/metrics.hpp"
#include "core/kernels/cuda/upload.hpp"
#include "core/ops/ops.hpp"
#include "core/ops/precision.hpp"
#include "core/train/class_counts.hpp"
#include "core/train/batch_block.hpp"
#include "core/train/batch_prefetch.hpp"
#include "core/train/micro_batch_tree.hpp"
#include "core/train/step_totals.hpp"
#include "core/train/stop_signals.hpp"

namespace dtrain::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Summed loss and number of correct predictions of one batch as a pair [loss, correct], each rank holding
// its summand when the two are pending over the same dims (then one all-reduce carries both, or the
// optimizer's, see Optimizer::apply), else summed already. Rows from `valid_rows` on (padding) are not
// counted; loss_sum must leave them out already.
DTensor batch_totals_pending(const DTensor& loss_sum, const DTensor& predicted, const DTensor& labels,
                             int64_t valid_rows = std::numeric_limits<int64_t>::max());

// batch_totals_pending on a GPU: the count and the pair are made on the device (no copy to the host).
DTensor device_batch_totals_pending(const DTensor& loss_sum, const DTensor& predicted, const DTensor& truth,
                                    int64_t valid_rows) {
  const Place place = predicted.local().place();
  int64_t rows = predicted.local().size();
  if (valid_rows < predicted.global_shape()[0]) {
    const int64_t first_row = predicted.local_offset(current_device().rank)[0];
    rows = std::clamp<int64_t>(valid_rows - first_row, 0, rows);
  }
  PartialDims partial;
  if (predicted.layout().is_sharded(0)) partial.add(predicted.layout().dim_at(0));
  MeshPtr mesh = predicted.layout().mesh_ptr();
  Tensor pair = Tensor::uninitialized({2}, place);
  kernels::kernels_for<kernels::MetricKernels>(place, "accuracy")
      .count_equal(predicted.local().buffer(), truth.local().buffer(), rows, pair.buffer() + 1);
  if (loss_sum.partial() == partial) {
    kernels::cuda_copy_on_device(place.device, pair.buffer(), loss_sum.local().buffer(), 1);
    return DTensor({2}, Layout::replicated(mesh, 1), pair, partial);
  }
  const DTensor count({}, Layout::replicated(mesh, 0), pair.slice_view(1, {}), partial);
  const Tensor loss = resolve_partial(loss_sum).local(), correct = resolve_partial(count).local();
  Tensor summed = Tensor::uninitialized({2}, place);
  kernels::cuda_copy_on_device(place.device, summed.buffer(), loss.buffer(), 1);
  kernels::cuda_copy_on_device(place.device, summed.buffer() + 1, correct.buffer(), 1);
  return DTensor({2}, Layout::replicated(mesh, 1), summed);
}

// batch_totals_pending from the predicted labels (argmax of the logits) and the true ones in their layout.
DTensor label_totals_pending(const DTensor& loss_sum, const DTensor& predicted, const DTensor& truth,
                             int64_t valid_rows) {
  if (predicted.local().place().is_cuda()) return device_batch_totals_pending(loss_sum, predicted, truth, valid_rows);
  float correct = 0;
  if (valid_rows >= predicted.global_shape()[0]) {
    for (int64_t i = 0; i < predicted.local().size(); ++i) correct += predicted.local()[i] == truth.local()[i];
  } else {
    const int64_t first_row = predicted.local_offset(current_device().rank)[0];
    const int64_t rows = std::clamp<int64_t>(valid_rows - first_row, 0, predicted.local().size());
    for (int64_t i = 0; i < rows; ++i) correct += predicted.local()[i] == truth.local()[i];
  }
  PartialDims partial;
  if (predicted.layout().is_sharded(0)) partial.add(predicted.layout().dim_at(0));
  MeshPtr mesh = predicted.layout().mesh_ptr();
  if (loss_sum.partial() == partial) {
    Tensor pair = Tensor::uninitialized({2});
    pair[0] = loss_sum.local()[0];
    pair[1] = correct;
    return DTensor({2}, Layout::replicated(mesh, 1), pair, partial);
  }
  DTensor count({}, Layout::replicated(mesh, 0), Tensor({}, correct), partial);
  return DTensor({2}, Layout::replicated(mesh, 1),
                 Tensor::from_vector({2}, {resolve_partial(loss_sum).local()[0], resolve_partial(count).local()[0]}));
}

DTensor batch_totals_pending(const DTensor& loss_sum, const DTensor& predicted, const DTensor& labels,
                             int64_t valid_rows) {
  return label_totals_pending(loss_sum, predicted, redistribute(labels, predicted.layout()), valid_rows);
}

// Per-example values of a batch (axis 0) with the rows from `valid_rows` on zeroed in this rank's block.
DTensor without_padding(const DTensor& per_example, int64_t valid_rows) {
  Tensor local = per_example.local().clone();
  const int64_t first_row = per_example.local_offset(current_device().rank)[0];
  const int64_t row_size = local.dim(0) > 0 ? local.size() / local.dim(0) : 0;
  const int64_t kept = std::clamp<int64_t>(valid_rows - first_row, 0, local.dim(0));
  if (kept < local.dim(0)) local.slice_view(kept * row_size, {(local.dim(0) - kept) * row_size}).fill(0.0f);
  return DTensor(per_example.global_shape(), per_example.layout(), std::move(local), per_example.partial());
}

// Tests' fault injection: DTRAIN_TEST_FAIL_AT=RANK:STEP makes device RANK throw when it starts step STEP
// (how a failure on one process only is tested end to end). {-1, -1} when unset.
std::pair<int, int64_t> injected_failure() {
  const char* text = std::getenv("DTRAIN_TEST_FAIL_AT");
  int rank = -1;
  long long step = -1;
  if (text == nullptr || std::sscanf(text, "%d:%lld", &rank, &step) != 2) return {-1, -1};
  return {rank, int64_t(step)};
}

// One rank's evaluation pass in inference mode over every example; the metrics are whole-mesh totals. A
// last batch that the batch shards do not divide is padded to a multiple of them with its own first
// examples again, and the padded rows are left out of the loss sum and the correct count.
SplitMetrics evaluate_on_rank(const nn::Model& model, nn::Parameters& params, const BatchSource& data,
                              const Layout& layout, int64_t batch_size, int64_t step, Loss loss,
                              kernels::HostToDevice* upload = nullptr, bool confusion = false, bool bf16 = false) {
  const DeviceContext& device = current_device();
  NoGradGuard no_grad;
  // Each batch's [loss sum, correct], summed over the mesh, read back in one copy per kCapacity batches.
  StepTotals totals(device.place);
  const std::vector<int64_t> order = data.order(0);
  const int64_t count = int64_t(order.size()), shards = layout.num_shards(0);
  const auto start = Clock::now();
  double loss_total = 0, correct_total = 0;
  std::optional<ClassCounts> per_class;
  int batch_dim = -1;
  std::vector<int64_t> padded;
  for (int64_t begin = 0; begin < count; begin += batch_size) {
    const int64_t size = std::min<int64_t>(batch_size, count - begin);
    std::span<const int64_t> ids = std::span(order).subspan(begin, size);
    if (size % shards != 0) {  // at most batch_size rows: the batch shards divide batch_size
      padded.assign(ids.begin(), ids.end());
      while (int64_t(padded.size()) % shards != 0) padded.push_back(ids[padded.size() % size_t(size)]);
      ids = padded;
    }
    Batch batch = make_batch(data, ids, layout, device.rank, nullptr, upload);
    nn::ForwardContext context{params, false, 0};
    context.bf16 = bf16;
    Var logits = model.forward(Var(batch.x), context);
    Var per_example = per_example_loss(loss, logits, batch.labels);
    if (batch.size > size) per_example = Var(without_padding(per_example.value(), size));
    Var total = reduce_sum(per_example, {0});
    if (totals.full())
      for (const auto& [loss_sum, correct] : totals.take()) loss_total += loss_sum, correct_total += correct;
    const DTensor predicted = predicted_classes(loss, logits.value());
    const DTensor truth = redistribute(batch.labels, predicted.layout());
    if (!per_class) per_class.emplace(class_count(loss, logits.value().global_shape().back()), confusion);
    per_class->add(predicted, truth, size);
    batch_dim = predicted.layout().dim_at(0);
    totals.push(resolve_partial(label_totals_pending(total.value(), predicted, truth, size)).local());
  }
  for (const auto& [loss_sum, correct] : totals.take()) loss_total += loss_sum, correct_total += correct;
  const double seconds = seconds_since(start);
  SplitMetrics metrics{"test", 0, step, count, count ? loss_total / double(count) : 0.0,
                       count ? correct_total / double(count) : 0.0, seconds > 0 ? double(count) / seconds : 0.0,
                       seconds};
  if (per_class) {
    per_class->sum_over_mesh(layout.mesh_ptr(), batch_dim, count);
    metrics.class_examples = std::move(per_class->examples);
    metrics.class_correct = std::move(per_class->correct);
    metrics.confusion = std::move(per_class->confusion);
  }
  return metrics;
}

// When the ranks look for a stop signal, and what they agree on. A look is an all-reduce over the whole mesh
// (which also waits for every rank): 16 us a step on {batch: 4, model: 2}, 7% of an IMDB step there. So
// while steps are fast the ranks look only every K steps, K such that they look about every
// kStopCheckSeconds of training (every step when a step takes longer). Each look agrees on the step time
// too (the slowest rank's), and every rank derives the next K from it: all look, and stop, at the same
// steps.
class StopCheck {
 public:
  static constexpr double kStopCheckSeconds = 0.005;
  // On a GPU a look also reads the steps' metrics back (the loop's only wait for the device): as often as the
  // progress line is redrawn (progress.hpp), so the host runs ahead of the GPU in between.
  static constexpr double kGpuStopCheckSeconds = 0.05;
  static constexpr int64_t kMaxEvery = 64;

  StopCheck(int64_t step, double interval)
      : interval_(interval), next_(step + 1), since_step_(step), since_(Clock::now()) {}

  bool due(int64_t step) const { return step >= next_; }

  // Collective over `everyone` (all mesh dims): the stop signal any rank has received (the highest number
  // when they differ), or 0. `step`: steps done.
  int look(const DeviceContext& device, const Group& everyone, int64_t step) {
    const double steps = double(std::max<int64_t>(1, step - since_step_));
    float values[2] = {float(StopSignals::received()), float(seconds_since(since_) / steps)};
    all_reduce_host(device, everyone, values, 2, ReduceOp::Max);
    const double step_seconds = std::max(double(values[1]), 1e-9);
    next_ = step + std::clamp<int64_t>(int64_t(interval_ / step_seconds), 1, kMaxEvery);
    since_step_ = step;
    since_ = Clock::now();
    return int(values[0]);
  }

 private:
  double interval_;
  int64_t next_, since_step_;
  Clock::time_point since_;
};

// The error for a loss that is not finite in the step after `position` (not counted yet): it names the
// step and the first of this rank's variables that holds a value that is not finite after the step.
Error non_finite_loss(double loss, const Position& position, int64_t batches, const nn::Parameters& params, int rank) {
  std::string variables = "every variable is finite after it";
  for (const std::string& path : params.paths()) {
    const Tensor local = params.at(path).value().local().to(Place::cpu());
    const float* values = local.data();
    const float* bad = std::find_if(values, values + local.size(), [](float v) { return !std::isfinite(v); });
    if (bad != values + local.size()) {
      variables = fmt::format("variable '{}' holds {} after it (device {}, element {} of its block)", path, *bad, rank,
                              bad - values);
      break;
    }
  }
  return Error(fmt::format("[train] the loss is not finite ({}) at step {} (epoch {}, batch {} of {}): {}; nothing of "
                           "that step was saved (a learning rate too high?)",
                           loss, position.step + 1, position.epoch + 1, position.batch_in_epoch + 1, batches, variables));
}

// Whether the validation split is due after the step that reached `position`.
bool validation_due(const ValidationOptions& options, const Position& position, bool end_of_epoch) {
  return options.every_steps > 0 ? position.step % options.every_steps == 0 : end_of_epoch;
}

// The run's records after a restore: one that monitors another metric than the options say (the config
// changed, or the checkpoint had none) starts over.
void adopt_records(ValidationState& state, const ValidationOptions& options) {
  const auto adopt = [](BestRecord& record, const std::string& metric) {
    if (record.metric != metric) record = BestRecord{metric};
  };
  adopt(state.early_stopping, options.early_stopping ? options.early_stopping->monitor.metric : "");
  adopt(state.keep_best, options.keep_best ? options.keep_best->metric : "");
  const std::string plateau = options.reduce_lr ? options.reduce_lr->monitor.metric : "";
  if (state.reduce_lr.metric != plateau) state.reduce_lr = PlateauRecord{plateau};
}

// Feeds a validation's metrics to the run's records; returns whether early stopping ends the run (Keras:
// `patience` validations in a row without an improvement).
bool update_records(ValidationState& state, const ValidationOptions& options, const SplitMetrics& metrics) {
  if (options.keep_best) {
    state.keep_best.update(*options.keep_best, monitored_value(options.keep_best->metric, metrics.loss, metrics.accuracy),
                           metrics.step);
  }
  if (!options.early_stopping) return false;
  const EarlyStoppingOptions& stopping = *options.early_stopping;
  const double value = monitored_value(stopping.monitor.metric, metrics.loss, metrics.accuracy);
  const bool improved = state.early_stopping.update(stopping.monitor, value, metrics.step);
  return !improved && state.early_stopping.wait >= stopping.patience;
}

// Feeds a validation's metrics to ReduceLROnPlateau's record; returns the new rate when it reduces it.
std::optional<double> reduce_on_plateau(ValidationState& state, const ValidationOptions& options,
                                        const SplitMetrics& metrics, optim::Optimizer& optimizer) {
  if (!options.reduce_lr) return std::nullopt;
  const ReduceLrOptions& plateau = *options.reduce_lr;
  const double value = monitored_value(plateau.monitor.metric, metrics.loss, metrics.accuracy);
  std::optional<double> rate =
      state.reduce_lr.update(plateau, value, metrics.step, optimizer.schedule().rate(metrics.step));
  if (rate) optimizer.set_learning_rate_scale(state.reduce_lr.scale);
  return rate;
}

std::string early_stop_notice(const ValidationState& state, const ValidationOptions& options, int64_t step) {
  const EarlyStoppingOptions& stopping = *options.early_stopping;
  const BestRecord& record = state.early_stopping;
  return fmt::format("early stopping after step {}: {} has not improved (min_delta {}) for {} validation(s), patience "
                     "{}; the best was {:.6g} at step {}",
                     step, record.metric, stopping.monitor.min_delta, record.wait, stopping.patience, record.best,
                     record.best_step);
}

// While alive, `device` computes the step's examples [first, first + count) of `of` (core/bitwise.hpp's
// example_axis); a whole batch again after, also when the step throws.
class MicroBatchScope {
 public:
  MicroBatchScope(DeviceContext& device, int64_t first, int64_t count, int64_t of) : device_(device) {
    device_.micro_batch = {first, count, of};
  }
  ~MicroBatchScope() { device_.micro_batch = {}; }
  MicroBatchScope(const MicroBatchScope&) = delete;
  MicroBatchScope& operator=(const MicroBatchScope&) = delete;

 private:
  DeviceContext& device_;
};

// One rank's variables, optimizer and position: initialized, then handed to hooks.on_start (a restore).
struct RankRun {
  nn::Parameters params;
  std::unique_ptr<optim::Optimizer> optimizer;
  Position position;
  ValidationState validation;
  RankState state;

  RankRun(const nn::Model& model, const TrainOptions& options, const Hooks& hooks, const DeviceContext& device)
      : params(model.initialize(device.rank, device.place)),
        optimizer(options.make_optimizer()),
        state{device.rank, params, *optimizer, position, &validation} {
    optimizer->set_clip(options.clip);
    optimizer->build(params);
    // Accumulated micro-batches: gradients summed as they come, not kept as factors (x, g) of every one.
    if (options.accumulation_steps > 1)
      for (const auto& path : params.paths()) params.at(path).state()->accepts_grad_factors = false;
    if (hooks.on_start) hooks.on_start(state);
    adopt_records(validation, options.validation);
    // A resumed run goes on at the rate its reductions left.
    optimizer->set_learning_rate_scale(validation.reduce_lr.scale);
  }
};

}  // namespace

Trainer::Trainer(const nn::Model& model, MeshPtr mesh, std::vector<std::string> input_specs, TrainOptions options)
    : model_(model), mesh_(std::move(mesh)), input_specs_(std::move(input_specs)), options_(std::move(options)) {
  DTRAIN_CHECK_USAGE(options_.batch_size >= 1, "[train] batch_size must be >= 1, got {}", options_.batch_size);
  DTRAIN_CHECK(options_.make_optimizer != nullptr, "[train] no optimizer");
}

Layout Trainer::input_layout(int rank) const {
  DTRAIN_CHECK_USAGE(int(input_specs_.size()) <= rank, "[train] the input layout {} has more axes than the input ({})",
                     fmt::join(input_specs_, ","), rank);
  std::vector<std::string> specs = input_specs_;
  specs.resize(rank, kUnsharded);
  if (specs.empty()) specs.push_back(kUnsharded);
  Layout layout(specs, mesh_);
  DTRAIN_CHECK_USAGE(options_.batch_size % layout.num_shards(0) == 0,
                     "[train] global batch {} is not divisible by mesh dim '{}' of size {}", options_.batch_size,
                     layout.spec(0), layout.num_shards(0));
  const int64_t k = options_.accumulation_steps;
  DTRAIN_CHECK_USAGE(k >= 1 && options_.batch_size % k == 0 && (options_.batch_size / k) % layout.num_shards(0) == 0,
                     "[train] {} micro-batches of a global batch of {} are not whole and divisible by mesh dim '{}' "
                     "of size {}",
                     k, options_.batch_size, layout.spec(0), layout.num_shards(0));
  return layout;
}

void Trainer::run_ranks(const std::function<void(DeviceContext&)>& fn) const {
  const bitwise::Scope canonical(options_.bitwise);
  const precision::Bf16Products products(options_.bf16);
  if (options_.in_process)
    run_spmd_in_process_on(mesh_, options_.devices, fn);
  else
    run_spmd_on(mesh_, options_.devices, fn);
}

Layout Trainer::prepare(const BatchSource& data) const {
  Shape input_shape{options_.batch_size};
  for (int64_t extent : data.example_shape()) input_shape.push_back(extent);
  const Layout layout = input_layout(int(input_shape.size()));
  layout.check_shape(input_shape);
  // This process's cores are shared by the devices it holds: each device's GEMMs get its share.
  const int local_devices = std::max(1, mesh_->size() / process_count());
  kernels::set_gemm_threads(std::max(1, process_cores() / local_devices));
  return layout;
}

TrainResult Trainer::train(const BatchSource& train_data, const BatchSource* test_data, Reporter& reporter,
                           const Hooks& hooks, const BatchSource* validation_data) {
  const Layout layout = prepare(train_data);
  DTRAIN_CHECK(validation_data == nullptr || validation_data->example_shape() == train_data.example_shape(),
               "[train] the validation examples have shape {}, the training examples {}",
               shape_string(validation_data ? validation_data->example_shape() : Shape{}),
               shape_string(train_data.example_shape()));
  const auto [failing_rank, failing_step] = injected_failure();
  const StopSignals signals;  // until this returns: a first SIGINT/SIGTERM/SIGHUP stops the run after its step
  TrainResult result;
  // data.prefetch: the ranks' next batches are read ahead on a worker thread (one for this process's ranks).
  std::optional<BatchPrefetch> prefetch;
  if (options_.prefetch > 0) prefetch.emplace(int(options_.prefetch));
  // train.profile: this process's step timeline; every rank's collectives go through a tracing communicator.
  std::optional<profile::Recorder> recorder;
  if (options_.profile.on()) {
    const Placement placement =
        options_.in_process ? placement_of(mesh_->size(), 1, 0) : placement_of(mesh_->size());
    std::vector<int> process_of(size_t(mesh_->size()));
    for (int rank = 0; rank < mesh_->size(); ++rank) process_of[size_t(rank)] = placement.process_of(rank);
    recorder.emplace(options_.profile, placement.first, placement.local, placement.process, placement.processes,
                     std::move(process_of));
  }
  run_ranks([&](DeviceContext& device) {
    const bool reports = device.rank == 0;
    profile::Track* const track = recorder ? &recorder->track(device.rank) : nullptr;
    std::optional<TracingCommunicator> tracing;
    if (track) {
      track->place = device.place.is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", device.place.device);
      track->on_gpu = device.place.is_cuda();
      tracing.emplace(*device.comm, *recorder, *track);
      device.comm = &*tracing;
    }
    RankRun run(model_, options_, hooks, device);
    nn::Parameters& params = run.params;
    optim::Optimizer& optimizer = *run.optimizer;
    Position& position = run.position;
    const Group& everyone = device.group(device.mesh->dim_names());
    const auto at_max_steps = [&] { return options_.max_steps >= 0 && position.step >= options_.max_steps; };

    HostBlock input;  // this rank's last batch, filled again
    // A GPU rank: batches go up through pinned memory, and the steps' totals stay on the device until a look
    // of the stop check (about every 50 ms), the end of an epoch, a stop or a save reads them back.
    const bool on_gpu = device.place.is_cuda();
    std::unique_ptr<kernels::HostToDevice> upload;
    if (on_gpu) upload = std::make_unique<kernels::HostToDevice>(device.place.device);
    StepTotals step_totals(device.place);
    struct PendingStep {
      Position before;  // the position the step started from
      int64_t size;
    };
    std::vector<PendingStep> pending;
    auto pending_since = Clock::now();
    int signal = 0;          // the stop signal every rank agreed on
    bool stopped = false;    // by a signal or max_steps: no further step
    bool ran_every_step = false;  // the last step of the last epoch ran
    StopCheck stop_check(position.step, on_gpu ? StopCheck::kGpuStopCheckSeconds : StopCheck::kStopCheckSeconds);
    bool told_partial = false;
    int64_t last_saved = -1;
    int64_t early_stopped_at = -1;
    // Evaluates the validation split after the step just done and updates the run's records; returns whether
    // early stopping ends the run. Every rank runs it; the ranks agree on the decision in a collective.
    const auto validate = [&] {
      SplitMetrics metrics = evaluate_on_rank(model_, params, *validation_data, layout, options_.batch_size,
                                              position.step, options_.loss, upload.get(), false, options_.bf16);
      metrics.split = "validation";
      metrics.epoch = position.epoch;
      if (reports) {
        result.epochs.push_back(metrics);
        reporter.on_split_end(metrics);
      }
      float stop = update_records(run.validation, options_.validation, metrics) ? 1.0f : 0.0f;
      if (options_.validation.early_stopping) all_reduce_host(device, everyone, &stop, 1, ReduceOp::Max);
      if (reports && stop > 0) reporter.on_notice(early_stop_notice(run.validation, options_.validation, position.step));
      if (const std::optional<double> rate = reduce_on_plateau(run.validation, options_.validation, metrics, optimizer);
          rate && reports) {
        const PlateauRecord& record = run.validation.reduce_lr;
        reporter.on_notice(fmt::format("Epoch {}: ReduceLROnPlateau reducing learning rate to {:.6g} (step {}: {} has not "
                                       "improved on {:.6g} for {} validation(s); the schedule's rate times {:.6g})",
                                       position.epoch + 1, *rate, position.step, record.metric, record.best,
                                       options_.validation.reduce_lr->patience, record.scale));
      }
      return stop > 0;
    };
    int64_t restored_step = -1;
    // Keras' restore_best_weights where the run ends (stopped early, or its last step): the weights of early
    // stopping's best validation, read back from the checkpoint keep_best kept, before the last save and the
    // last evaluation.
    const auto restore_best = [&](int64_t batches) {
      const BestRecord& best = run.validation.early_stopping;
      if (best.best_step < 0) {
        if (reports) reporter.on_notice("restore_best_weights: no validation has run, so the last weights stay");
        return;
      }
      if (best.best_step != position.step) {
        DTRAIN_CHECK(hooks.restore_best != nullptr, "[train] restore_best_weights needs the best checkpoint (keep_best)");
        hooks.restore_best(run.state, best.best_step);
      }
      restored_step = best.best_step;
      if (reports) {
        reporter.on_notice(fmt::format("restored the weights of epoch {} (step {}, {} {:.4f}){}",
                                       (best.best_step + batches - 1) / std::max<int64_t>(1, batches), best.best_step,
                                       best.metric, best.best,
                                       best.best_step == position.step ? ": the last step's, the best" : ", the best validation"));
      }
    };
    if (at_max_steps()) {
      stopped = true;
      if (reports) {
        reporter.on_notice(fmt::format("train.max_steps = {} and the run is at step {} already: no step to run",
                                       options_.max_steps, position.step));
      }
    }
    std::optional<BatchPrefetch::Reader> prefetched;
    if (prefetch && !stopped) {
      prefetched.emplace(*prefetch, BatchPlan{&train_data, layout, device.rank, options_.batch_size,
                                              options_.batch_size / options_.accumulation_steps, options_.epochs,
                                              position.epoch, position.batch_in_epoch,
                                              options_.max_steps < 0 ? -1 : options_.max_steps - position.step});
    }
    for (; !stopped && position.epoch < options_.epochs; ++position.epoch, position.batch_in_epoch = 0) {
      const std::vector<int64_t> order = train_data.order(position.epoch);
      bool dropped = false;
      const int64_t batches = runnable_batches(int64_t(order.size()), options_.batch_size, layout.num_shards(0), &dropped);
      if (reports && dropped && !told_partial) {
        reporter.on_notice(fmt::format("the last partial batch of {} examples is dropped each epoch: mesh dim '{}' ({}) does not divide it",
                                       order.size() % options_.batch_size, layout.spec(0), layout.num_shards(0)));
        told_partial = true;
      }
      if (position.batch_in_epoch >= batches) continue;  // restored at the end of this epoch
      // An epoch resumed mid-way goes on from the sums of its batches before (kept in the checkpoint).
      if (position.batch_in_epoch == 0) position.totals = {};
      const EpochTotals resumed = position.totals;
      if (reports) reporter.on_epoch_begin(position.epoch, options_.epochs, batches);
      if (reports && resumed.examples > 0) reporter.on_epoch_resumed(resumed);
      const int64_t micro = options_.batch_size / options_.accumulation_steps;
      // train.bitwise: micro-batches add in the canonical tree (a tree per variable's gradient, one for the
      // totals), each micro-batch's example axes cut as the step's batch (core/bitwise.hpp).
      const bool in_tree = bitwise::active() && options_.accumulation_steps > 1;
      std::vector<MicroBatchTree> gradient_trees(in_tree ? params.paths().size() : 0);
      MicroBatchTree totals_tree;
      const auto epoch_start = Clock::now();
      double loss_total = resumed.loss_sum, correct_total = resumed.correct;
      int64_t examples = resumed.examples;
      // The steps' totals kept on the GPU, read back and reported (the same on every rank: the loss check).
      auto read_back = [&] {
        if (pending.empty()) return;
        const std::vector<std::array<double, 2>> totals = step_totals.take();
        const double seconds = seconds_since(pending_since) / double(pending.size());
        for (size_t i = 0; i < pending.size(); ++i) {
          const auto [loss_sum, correct] = totals[i];
          const PendingStep& step = pending[i];
          if (!std::isfinite(loss_sum)) throw non_finite_loss(loss_sum, step.before, batches, params, device.rank);
          loss_total += loss_sum;
          correct_total += correct;
          if (reports) {
            result.step_losses.push_back(loss_sum / double(step.size));
            reporter.on_step({step.before.epoch, step.before.step + 1, step.before.batch_in_epoch + 1, batches, step.size,
                              loss_sum / double(step.size), correct / double(step.size), seconds,
                              optimizer.learning_rate_at(step.before.step)});
          }
        }
        pending.clear();
        pending_since = Clock::now();
      };
      while (position.batch_in_epoch < batches && !stopped) {
        DTRAIN_CHECK(!(device.rank == failing_rank && position.step == failing_step),
                     "[train] device {} fails at step {} (DTRAIN_TEST_FAIL_AT)", device.rank, position.step);
        if (recorder) recorder->begin_step(device.rank, position.step + 1);
        const auto step_start = Clock::now();
        const int64_t begin = position.batch_in_epoch * options_.batch_size;
        const int64_t size = std::min<int64_t>(options_.batch_size, int64_t(order.size()) - begin);
        // The step's batch in micro-batches of `micro` examples (one when not accumulating), their gradients
        // and totals summed; each micro-batch's mean loss is over the whole step's examples. Under
        // train.bitwise each is a node of the step's tree, and they add in the tree.
        std::optional<DTensor> step_totals_sum;
        const int64_t step_micro = micro_batch_examples(size, micro, options_.accumulation_steps);
        for (int64_t micro_begin = 0; micro_begin < size; micro_begin += step_micro) {
          const int64_t micro_size = std::min(step_micro, size - micro_begin);
          const MicroBatchScope in_micro_batch(device, micro_begin, micro_size, size);
          const std::span<const int64_t> ids = std::span(order).subspan(begin + micro_begin, micro_size);
          Batch batch = [&] {
            const profile::Span wait(track, profile::Category::Data, "", prefetched ? "data wait" : "read batch",
                                     {{"examples", micro_size}});
            return prefetched ? to_batch(prefetched->next(ids), micro_size, train_data.example_shape(), layout,
                                         upload.get())
                              : make_batch(train_data, ids, layout, device.rank, &input, upload.get());
          }();
          nn::ForwardContext context{params, true, uint64_t(position.step)};
          context.bf16 = options_.bf16;
          Var logits = model_.forward(Var(batch.x), context);
          Var total = reduce_sum(per_example_loss(options_.loss, logits, batch.labels), {0});
          Var loss = options_.reduction == Reduction::Mean ? scale(total, 1.0f / float(size)) : total;
          backward(loss);
          DTensor micro_totals =
              batch_totals_pending(total.value(), predicted_classes(options_.loss, logits.value()), batch.labels);
          if (in_tree) {
            for (size_t i = 0; i < params.paths().size(); ++i) {
              std::optional<DTensor>& grad = params.at(params.paths()[i]).state()->grad;
              if (!grad) continue;
              gradient_trees[i].add(resolve_partial(*grad));
              grad.reset();
            }
            totals_tree.add(resolve_partial(micro_totals));
          } else {
            step_totals_sum = step_totals_sum ? ops::add(*step_totals_sum, micro_totals) : std::move(micro_totals);
          }
        }
        if (in_tree) {
          for (size_t i = 0; i < params.paths().size(); ++i)
            if (!gradient_trees[i].empty()) params.at(params.paths()[i]).state()->grad = gradient_trees[i].take();
          step_totals_sum = totals_tree.take();
        }
        DTensor totals = std::move(*step_totals_sum);
        DTensor* const sum_with_gradients[] = {&totals};
        optimizer.apply(params, sum_with_gradients);
        // Summed over the mesh now, so every rank sees the same value and stops at the same step.
        double loss_sum = 0, correct = 0;
        if (on_gpu) {
          if (pending.empty()) pending_since = step_start;
          pending.push_back({position, size});
          step_totals.push(totals.local());
        } else {
          loss_sum = totals.local()[0], correct = totals.local()[1];
          if (!std::isfinite(loss_sum)) throw non_finite_loss(loss_sum, position, batches, params, device.rank);
          loss_total += loss_sum;
          correct_total += correct;
        }
        examples += size;
        ++position.step;
        ++position.batch_in_epoch;
        const bool end_of_epoch = position.batch_in_epoch == batches;
        ran_every_step = end_of_epoch && position.epoch + 1 == options_.epochs;
        const bool looks = stop_check.due(position.step);
        if (looks) signal = stop_check.look(device, everyone, position.step);
        if (hooks.after_step) {
          const profile::Span wait(track, profile::Category::Checkpoint, "", "checkpoint wait");
          hooks.after_step(run.state, looks);
        }
        stopped = signal != 0 || at_max_steps();
        // Validated when due even at a stop, so that a resumed run has seen the same validations.
        const bool validates = validation_data != nullptr && validation_due(options_.validation, position, end_of_epoch);
        const bool wanted = hooks.want_save && hooks.want_save(position, end_of_epoch);
        bool saves = hooks.save && (wanted || stopped || ran_every_step || (validates && options_.validation.keep_best));
        // Every rank reads back at the same steps: a loss that is not finite stops them all at once.
        if (on_gpu && (looks || stopped || end_of_epoch || saves || validates || step_totals.full())) read_back();
        if (reports && !on_gpu) {
          result.step_losses.push_back(loss_sum / double(size));
          reporter.on_step({position.epoch, position.step, position.batch_in_epoch, batches, size,
                            loss_sum / double(size), correct / double(size), seconds_since(step_start),
                            optimizer.learning_rate_at(position.step - 1)});
        }
        if (reports) {
          if (signal != 0) {
            reporter.on_notice(fmt::format("stopping after step {}: {} received", position.step, signal_name(signal)));
          } else if (stopped && !ran_every_step) {
            reporter.on_notice(end_of_epoch ? fmt::format("stopped at train.max_steps = {} (after epoch {} of {})",
                                                          options_.max_steps, position.epoch + 1, options_.epochs)
                                            : fmt::format("stopped at train.max_steps = {} (epoch {}, batch {} of {})",
                                                          options_.max_steps, position.epoch + 1,
                                                          position.batch_in_epoch, batches));
          }
        }
        if (validates && validate() && !stopped) {
          stopped = true;
          early_stopped_at = position.step;
          saves = hooks.save != nullptr;
        }
        if (options_.validation.restore_best_weights && (early_stopped_at == position.step || ran_every_step))
          restore_best(batches);
        // A stop, and the run's last step, save the position reached whatever want_save says (asked all the
        // same, above: it may count): `checkpoint.every: N` steps need not divide the run's steps.
        if (saves) {
          position.totals = {loss_total, correct_total, examples};  // read back above on a GPU
          const auto save_start = Clock::now();
          {
            const profile::Span save(track, profile::Category::Checkpoint, "", "checkpoint save",
                                     {{"end_of_epoch", end_of_epoch}});
            hooks.save(run.state, end_of_epoch);
          }
          if (reports) reporter.on_save(position.step, seconds_since(save_start));
          last_saved = position.step;
        }
        if (recorder) recorder->end_step(device.rank, position.step);
      }
      const bool epoch_done = position.batch_in_epoch == batches;
      if (reports && epoch_done && examples > 0) {  // a partial epoch is no epoch's result
        const double seconds = seconds_since(epoch_start);
        SplitMetrics metrics{"train", position.epoch, position.step, examples, loss_total / double(examples),
                             correct_total / double(examples), double(examples - resumed.examples) / seconds, seconds};
        result.epochs.push_back(metrics);
        reporter.on_split_end(metrics);
      }
      if (signal != 0) break;  // asked to stop: no evaluation
      const bool last_epoch = stopped || position.epoch + 1 == options_.epochs;
      if ((options_.eval_every_epoch || last_epoch) && test_data != nullptr && examples > 0) {
        // Same threads, same parameters: evaluate in place.
        SplitMetrics metrics = evaluate_on_rank(model_, params, *test_data, layout, options_.batch_size, position.step,
                                                options_.loss, upload.get(), false, options_.bf16);
        metrics.epoch = position.epoch;
        if (reports) {
          result.epochs.push_back(metrics);
          reporter.on_split_end(metrics);
        }
      }
      if (stopped) break;  // where it stopped: no next epoch
    }
    if (!stopped) ran_every_step = true;
    if (recorder) recorder->finish(device.rank);  // writes the trace when it is the process's last device
    if (hooks.finish_saves) hooks.finish_saves(run.state);  // the last save committed before the run ends
    // A signal after the last step's check (in the last evaluation, say) found nothing left to stop, but the
    // exit code still tells it.
    if (signal == 0) {
      signal = stop_check.look(device, everyone, position.step);
      if (reports && signal != 0) {
        reporter.on_notice(fmt::format("{} received after the last step ({}): nothing left to stop", signal_name(signal),
                                       position.step));
      }
    }
    if (reports) {
      result.position = position;
      result.stop_signal = signal;
      result.stopped_early = stopped && !ran_every_step;
      result.last_saved_step = last_saved;
      result.early_stopped_at = early_stopped_at;
      result.restored_step = restored_step;
    }
  });
  return result;
}

SplitMetrics Trainer::evaluate(const BatchSource& data, Reporter& reporter, const Hooks& hooks, bool confusion) {
  const Layout layout = prepare(data);
  SplitMetrics result;
  run_ranks([&](DeviceContext& device) {
    RankRun run(model_, options_, hooks, device);
    std::unique_ptr<kernels::HostToDevice> upload;
    if (device.place.is_cuda()) upload = std::make_unique<kernels::HostToDevice>(device.place.device);
    SplitMetrics metrics = evaluate_on_rank(model_, run.params, data, layout, options_.batch_size, run.position.step,
                                            options_.loss, upload.get(), confusion, options_.bf16);
    metrics.epoch = run.position.epoch;
    if (device.rank == 0) {
      result = metrics;
      reporter.on_split_end(metrics);
    }
  });
  return result;
}

}  // namespace dtrain::train

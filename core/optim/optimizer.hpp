// Optimizers update each trainable variable from its gradient, one rank at a time, on shards.
//
// ZeRO-1 as llm.c does it: data-parallel dims are not spent on repeated work. A variable's data-parallel dims
// D are the mesh dims of size > 1 that its layout does not use: the ranks of one group along D hold the same
// shard of the variable (L values) and, after backward, summands of its gradient. The variables of one D (at
// one place) are laid end to end in a flat buffer of T values, cut into n = |group| shards of c = ceil(T / n)
// (the last padded); member i owns ShardInfo{i * c, size}. Each step, per flat buffer, on CPU and GPU alike:
//   - each member copies its gradients into its flat gradient buffer, and ONE reduce-scatter gives it the sum
//     of its shard (a gradient that arrives already summed is copied into the shard instead);
//   - it updates its shard of the variables with its shard of the slots (the update kernels of the
//     variables' place): 1/n of the update work, and slots of c values per rank, not T;
//   - ONE all-gather of the updated shards makes the new values, which the variables then view (in-process
//     members may share that buffer, so it is never written in place afterwards).
// A weight gradient x^T g from a matmul arrives as its factors (x, g) (VarState::grad_factors) on the CPU
// when the layouts line up: each member then gathers x and g over the group (the whole batch: small) and
// computes just the rows of x^T g its shard needs, straight into the shard, with the whole batch as the inner
// dimension, instead of every member computing all of x_r^T g_r (a thin, inefficient GEMM) for the
// reduce-scatter to read n of them back (memory traffic of n gradients). Same sums, other rounding. A flat
// buffer whose gradients all came so needs no reduce-scatter at all. Measured (bench/ab_train_step.sh, 7
// interleaved rounds, factors on vs off): mnist_core_dp 1.7x slower without it, imdb_dp within the noise.
// Variables whose shard is under the optimizer's min_sharded_elements() values, or with no data-parallel
// dim, are updated whole, in place, on every rank (their gradients summed together in bucketed all-reduces):
// splitting a small one saves less than it costs. The threshold is measured per optimizer (sgd.cpp,
// adam.cpp): the costlier the update of a value, the smaller the variables worth splitting.
//
// Checkpoints see slots in their variable's layout, whatever the mesh: slots() is a collective that
// all-gathers each flat slot and returns, by pointer, DTensors laid out like the variables that view it.
// They are the slots' values until the next apply(), which first copies this rank's shard back out of them
// (so a restore writes into what slots() returned, a save reads it) and then frees them. Slots of variables
// updated whole are such DTensors all the time.
//
// Gradient clipping (set_clip; train.clip) acts on the summed gradients, where apply() has them: a rank's
// shard of a flat buffer, the whole local shard of a variable updated whole. By value: each value clamped
// before its update. By global norm (Keras' global_clipnorm): apply() first sums every gradient, then each
// rank adds the squares of the values it alone holds (its shards; of a gradient updated whole, the shard only
// on the ranks at coordinate 0 of every mesh dim the variable's layout leaves out, where the shard is
// replicated), one all-reduce over the whole mesh gives the norm, and every gradient is scaled by
// min(1, global_norm / norm) before the updates.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/nn/layer.hpp"
#include "core/optim/factor_product.hpp"
#include "core/optim/schedule.hpp"
#include "core/partial_dims.hpp"
#include "core/place.hpp"

namespace dtrain::optim {

// Whether a variable's update is flat-sharded, and over which data-parallel dims (see the header comment).
struct FlatSharding {
  std::vector<std::string> dims;  // D, in mesh order; empty when the update is whole
  PartialDims dim_set;            // D as mesh dim indices: partial() of a gradient pending over D
  int group_size = 1;             // n: the product of D's sizes (1: updated whole on every rank)
  int64_t local_size = 0;         // L: values in a rank's shard of the variable

  bool sharded() const { return group_size > 1; }
};

// The flat sharding of a variable of `shape` in `layout`; whole under `min_elements` local values.
FlatSharding flat_sharding(const Layout& layout, const Shape& shape, int64_t min_elements);

// A rank's part of a flat buffer (llm.c's ShardInfo): values [offset, offset + size).
struct ShardInfo {
  int64_t offset = 0, size = 0;
};

// Part `index` of a flat buffer of `total` values cut into `parts` of ceil(total / parts) values: the last
// ones shorter, maybe empty (offset then clamped to total).
ShardInfo shard_of(int64_t total, int parts, int index);

// Gradient clipping; at most one of the two is set (0: off).
struct ClipOptions {
  float global_norm = 0;  // every gradient scaled by min(1, global_norm / (norm of all gradients together))
  float value = 0;        // every gradient value clamped to [-value, value]
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;

  // Chooses each trainable variable's flat sharding (variables under `min_elements` local values, by
  // default min_sharded_elements(), are updated whole), lays the flat-sharded ones into flat buffers and
  // creates the slots (zeros) at the variables' place. Marks the variables so backward() leaves their
  // gradients partial (the update sums them). Runs on every rank (run_spmd).
  void build(nn::Parameters& params) { build(params, min_sharded_elements()); }
  void build(nn::Parameters& params, int64_t min_elements);
  // Variables whose shard has fewer values are updated whole on every rank (see the header comment).
  virtual int64_t min_sharded_elements() const = 0;
  // One update of every trainable variable that has a gradient; clears the gradients. Collective.
  // `also_sum`: other small partial DTensors (a step's loss and accuracy counts) summed in the same
  // collectives as the small gradients, saving them a rendezvous of their own; none is partial afterwards.
  void apply(nn::Parameters& params, std::span<DTensor* const> also_sum = {});
  // Named state for checkpoints, e.g. ("dense1/kernel/m", slot), stable order; each slot in its variable's
  // layout. Collective (gathers the shards); the DTensors stay valid and authoritative until the next
  // apply(), which reads writes to them back (see the header comment).
  std::vector<std::pair<std::string, DTensor*>> slots();

  // Clipping of the summed gradients in apply() (see the header comment).
  void set_clip(const ClipOptions& clip) { clip_ = clip; }
  const ClipOptions& clip() const { return clip_; }
  // The norm of all gradients of the last apply() with clip.global_norm set (before clipping), on every rank.
  double last_global_norm() const { return last_global_norm_; }

  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t iterations) { iterations_ = iterations; }

  // The learning rate of the update after `step` updates (the one that makes iterations() step + 1): the
  // schedule's, by default the constant learning rate the optimizer was made with.
  double learning_rate_at(int64_t step) const { return schedule_.rate(step) * learning_rate_scale_; }
  const LearningRateSchedule& schedule() const { return schedule_; }
  // A factor on the schedule's rate (ReduceLROnPlateau's reductions; 1 by default).
  void set_learning_rate_scale(double scale) { learning_rate_scale_ = scale; }
  double learning_rate_scale() const { return learning_rate_scale_; }
  // Replaces the schedule (its learning_rate is the peak rate); checked (UsageError).
  void set_schedule(const LearningRateSchedule& schedule);

  // The values this rank updates, and keeps per slot, of trainable variable `index` (build order): those of
  // its shard of the flat buffer for a flat-sharded update, L for a whole one.
  int64_t slot_values(size_t index) const;

 protected:
  // "m", "v" for Adam; none for SGD.
  virtual std::vector<std::string> slot_names() const = 0;
  // Writes the updated `size` values of one block to `out` from the old ones in `in` (the same pointer
  // for an update in place; a flat-sharded update reads the variable and writes into the gather), `slots`
  // following slot_names(). Every pointer is at `place` (the variable's), whose UpdateKernels do the
  // arithmetic. iterations() already counts this step.
  virtual void update(const Place& place, float* out, const float* in, const float* grad,
                      const std::vector<float*>& slots, int64_t size) = 0;
  // The rate of the update in progress (iterations() already counts it).
  float current_learning_rate() const { return float(learning_rate_at(iterations_ - 1)); }

  LearningRateSchedule schedule_;  // the constructors set a constant one at their learning rate
  double learning_rate_scale_ = 1;

 private:
  struct Entry {
    Entry(std::string path, Shape shape, Layout layout, int64_t size)
        : path(std::move(path)), shape(std::move(shape)), layout(std::move(layout)), size(size) {}
    std::string path;
    Shape shape;
    Layout layout;        // the variable's
    int64_t size = 0;     // L: values in this rank's shard of the variable
    int flat = -1;        // its flat buffer (an index into flats_); -1: updated whole
    int64_t offset = 0;   // where it starts in its flat buffer
    std::vector<DTensor> full;  // whole: the slots; flat: the slots gathered by slots(), until apply()
    // The step in progress (flat): whether it has a gradient, and how it came when not as summands in the
    // variable's layout: summed (copied into the shard after the reduce-scatter), or as factors.
    bool stepped = false;
    std::optional<DTensor> summed;
    std::vector<VarState::GradFactors> factors;
  };
  // The variables flat-sharded over one group at one place, end to end (see the header comment).
  struct FlatBuffer {
    Group group;
    PartialDims dims;
    Place place;
    std::vector<size_t> entries;  // indices into entries_, in offset order
    int64_t total = 0;            // T
    int64_t capacity = 0;         // c = ceil(T / n): each member's part, padding included
    ShardInfo shard;              // this rank's part
    Tensor gradients;             // n * c: this rank's summands in flat order (the padding stays zero)
    Tensor gradient_shard;        // c: the summed gradient of the shard
    std::vector<Tensor> slots;    // c values each: this rank's shard of every slot
    bool stepped = false;         // some variable had a gradient this step
  };
  // The part of `entry` in its flat buffer's shard, as a range of the flat buffer (size 0: none).
  ShardInfo own_part(const Entry& entry) const;
  // The flat buffer's summed gradient shard, from the gradients of its variables (one reduce-scatter).
  void sum_gradients(FlatBuffer& flat, nn::Parameters& params);
  // The rows of sum(x^T g) over `factors` that `entry`'s part of the shard holds, into `out`, from the group's
  // gathered x and g (the whole batch).
  void gradient_from_factors(const FlatBuffer& flat, const Entry& entry, float* out);
  // The update of the shard, then the all-gather of the new values, which the variables then view.
  void update_and_gather(FlatBuffer& flat, nn::Parameters& params);
  // clip_.global_norm's factor, from the flat shards and the summed whole gradients.
  float global_norm_factor(std::span<const std::pair<Entry*, DTensor>> whole);
  double exact_squares(std::span<const std::pair<Entry*, DTensor>> whole);        // train.bitwise
  float squares_in_any_order(std::span<const std::pair<Entry*, DTensor>> whole);  // summed over the mesh
  void take_back_gathered_slots();
  void run_update(const Place& place, float* out, const float* in, const float* grad, const std::vector<float*>& slots,
                  int64_t size);

  std::vector<Entry> entries_;
  std::vector<FlatBuffer> flats_;
  FactorProduct factor_product_;
  std::vector<RowBlock> blocks_;           // gradient_from_factors: each group member's rows of x^T g
  std::vector<DTensor*> small_gradients_;  // apply(): those summed in buckets (kept for its capacity)
  int64_t iterations_ = 0;
  ClipOptions clip_;
  double last_global_norm_ = 0;
};

// weight_decay (every optimizer) is Keras': decoupled, w -= learning_rate * weight_decay * w before the
// step (not an L2 term added to the gradient).
struct AdamOptions {
  float learning_rate = 1e-3f, beta_1 = 0.9f, beta_2 = 0.999f, epsilon = 1e-7f;  // Keras defaults
  float weight_decay = 0.0f;  // make_adamw: Keras AdamW's default is 0.004
};

// Keras' SGD: velocity = momentum * velocity - lr * g; w += velocity (nesterov: w += momentum * velocity -
// lr * g). Name "sgd" without momentum (no slots), "sgd_momentum" with it (slot "momentum").
struct SgdOptions {
  float learning_rate = 0.01f, momentum = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
};

std::unique_ptr<Optimizer> make_sgd(float learning_rate);
std::unique_ptr<Optimizer> make_sgd(const SgdOptions& options);
std::unique_ptr<Optimizer> make_adam(AdamOptions options);
// Adam with decoupled weight decay (Keras AdamW), named "adamw"; slots "m", "v" as Adam's.
std::unique_ptr<Optimizer> make_adamw(AdamOptions options);

}  // namespace dtrain::optim

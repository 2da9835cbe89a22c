// Optimizers update each trainable variable from its gradient, one rank at a time, on shards.
//
// Data-parallel dims are not wasted on repeated work (ZeRO-1 with flat sharding, as DeepSpeed does it).
// A variable's data-parallel dims D are the mesh dims of size > 1 that its layout does not use: the ranks
// of one group along D hold the same shard of the variable (L values, contiguous) and, after backward,
// summands of its gradient. That shard is cut into n = |group| chunks of c = ceil(L / n) values (the
// last one padded); member i of the group owns chunk i:
//   - apply() reduce-scatters the partial gradient so each member gets the sum of its chunk (a gradient
//     that is already summed is just sliced; one pending over only some of D is all-reduced first),
//     updates its chunk of the variable with its chunks of the slots, and all-gathers the chunks into a
//     new buffer for the variable's shard (all_gather_shared: in-process ranks share it, so the values
//     are never written in place afterwards): the traffic of one all-reduce, 1/n of the update work, and
//     slots of c values (not L) per rank.
//   - A weight gradient x^T g from a matmul arrives as its factors (x, g) (VarState::grad_factors) when
//     the layouts line up: each member then gathers x and g over the group (the whole batch: small) and
//     computes just the rows of x^T g its chunk needs, with the whole batch as the inner dimension,
//     instead of every member computing all of x_r^T g_r (a thin, inefficient GEMM) for the
//     reduce-scatter to read n of them back (memory traffic of n gradients). Same sums, other rounding.
//   - Variables whose shard is under the optimizer's min_sharded_elements() values are updated whole, in
//     place, on every rank (their gradients summed together in one bucketed all_reduce): splitting them
//     costs two rendezvous of the group and saves less. So is any variable with no data-parallel dim.
//     The threshold is measured per optimizer (sgd.cpp, adam.cpp): the costlier the update of a value,
//     the smaller the variables worth splitting.
//
// Checkpoints see slots in their variable's layout, whatever the mesh: slots() is a collective that
// all-gathers each slot's chunks into a DTensor laid out like its variable, held by the optimizer and
// returned by pointer. Those DTensors are the slots' values until the next apply(), which first slices
// this rank's chunks back out of them (so a restore writes into what slots() returned, a save reads it)
// and then frees them. Slots of variables updated whole are such DTensors all the time.
//
// Gradient clipping (set_clip; train.clip) acts on the summed gradients, where apply() has them: a member's
// chunk of a flat-sharded variable, the whole local shard of one updated whole. By value: each value clamped
// before its update. By global norm (Keras' global_clipnorm): apply() first sums every gradient (all chunks
// kept, 1/n of the gradients), then each rank adds the squares of the values it alone holds (its chunks; of
// a gradient updated whole, the shard only on the ranks at coordinate 0 of every mesh dim the variable's
// layout leaves out, where the shard is replicated), one all-reduce over the whole mesh gives the norm, and
// every gradient is scaled by min(1, global_norm / norm) before the updates.
#pragma once
#include <algorithm>
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

// How a variable's update is split over its data-parallel dims (see the header comment).
struct FlatSharding {
  std::vector<std::string> dims;  // D, in mesh order; empty when the update is whole
  PartialDims dim_set;            // D as mesh dim indices: partial() of a gradient pending over D
  int group_size = 1;             // n: the product of D's sizes (1: updated whole on every rank)
  int64_t local_size = 0;         // L: values in a rank's shard of the variable
  int64_t chunk = 0;              // c = ceil(L / n): values a rank updates (and keeps per slot)

  bool sharded() const { return group_size > 1; }
  // Member `index`'s chunk: [begin, begin + count) of the shard (count < chunk for the last, maybe 0).
  int64_t begin(int index) const { return std::min(int64_t(index) * chunk, local_size); }
  int64_t count(int index) const { return std::min(chunk, local_size - begin(index)); }
};

// The flat sharding of a variable of `shape` in `layout`; whole under `min_elements` local values.
FlatSharding flat_sharding(const Layout& layout, const Shape& shape, int64_t min_elements);

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
  // default min_sharded_elements(), are updated whole) and creates its slots (zeros) at the variable's place.
  // Marks the variables so backward() leaves their gradients partial (the update sums them). Runs on every
  // rank (run_spmd). A variable on a GPU is always updated whole: the flat-sharded path's host scratch and
  // shared gathers are the CPU's; on a GPU the update is one kernel and its all-reduce stays on the device.
  void build(nn::Parameters& params) { build(params, min_sharded_elements()); }
  void build(nn::Parameters& params, int64_t min_elements);
  // Variables whose shard has fewer values are updated whole on every rank (see the header comment).
  virtual int64_t min_sharded_elements() const = 0;
  // One update of every trainable variable that has a gradient; clears the gradients. Collective.
  // `also_sum`: other small partial DTensors (a step's loss and accuracy counts) summed in the same
  // collectives as the small gradients, saving them a rendezvous of their own; none is partial afterwards.
  void apply(nn::Parameters& params, std::span<DTensor* const> also_sum = {});
  // Named state for checkpoints, e.g. ("dense1/kernel/m", slot), stable order; each slot in its variable's
  // layout. Collective (gathers the chunks); the DTensors stay valid and authoritative until the next
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
  double learning_rate_at(int64_t step) const { return schedule_.rate(step); }
  const LearningRateSchedule& schedule() const { return schedule_; }
  // Replaces the schedule (its learning_rate is the peak rate); checked (UsageError).
  void set_schedule(const LearningRateSchedule& schedule);

  // The values this rank updates, and keeps per slot, of trainable variable `index` (build order): c for a
  // flat-sharded update, L for a whole one.
  int64_t slot_values(size_t index) const;

 protected:
  // "m", "v" for Adam; none for SGD.
  virtual std::vector<std::string> slot_names() const = 0;
  // Writes the updated `size` values of one block to `out` from the old ones in `in` (the same pointer
  // for an update in place; a flat-sharded update reads the shared variable and writes its own chunk,
  // saving a copy); `slots` follow slot_names(). Every pointer is at `place` (the variable's), whose
  // UpdateKernels do the arithmetic. iterations() already counts this step.
  virtual void update(const Place& place, float* out, const float* in, const float* grad,
                      const std::vector<float*>& slots, int64_t size) = 0;
  // The rate of the update in progress (iterations() already counts it).
  float current_learning_rate() const { return float(schedule_.rate(iterations_ - 1)); }

  LearningRateSchedule schedule_;  // the constructors set a constant one at their learning rate

 private:
  struct Entry {
    std::string path;
    Shape shape;
    Layout layout;  // the variable's
    FlatSharding sharding;
    Group group;                 // the ranks along sharding.dims (sharded entries)
    std::vector<Tensor> chunks;  // sharded: this rank's chunk of each slot (c values)
    std::vector<DTensor> full;   // whole: the slots; sharded: the slots gathered by slots(), until apply()
  };
  void apply_sharded(Entry& entry, Var& var, std::optional<DTensor> grad, std::vector<VarState::GradFactors> factors);
  // apply_sharded in two halves: this rank's chunk of the summed gradient (in scratch_, or in `grad`), then
  // the update from it and the gather of the variable's shard.
  const float* sharded_gradient(Entry& entry, Var& var, std::optional<DTensor>& grad,
                                std::vector<VarState::GradFactors> factors);
  void update_sharded(Entry& entry, Var& var, const float* g);
  // apply()'s updates with clip_.global_norm set (the gradients already bucket-summed).
  void apply_clipped_by_norm(nn::Parameters& params);
  // This rank's chunk of sum(x^T g) over the factors, from the group's gathered x and g (full batch).
  void chunk_from_factors(const Entry& entry, const std::vector<VarState::GradFactors>& factors, float* grad_chunk);
  void take_back_gathered_slots();
  void run_update(const Place& place, float* out, const float* in, const float* grad, const std::vector<float*>& slots,
                  int64_t size);

  std::vector<Entry> entries_;
  FactorProduct factor_product_;
  std::vector<DTensor*> small_gradients_;  // apply(): those summed in buckets (kept for its capacity)
  std::vector<RowBlock> blocks_;  // chunk_from_factors: each group member's rows of x^T g
  Tensor scratch_;  // sharded updates: the rank's chunk of the gradient and of the variable, a padded send
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

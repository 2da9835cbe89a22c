#include "engine/dry_step.hpp"

#include <optional>

#include "engine/model_builder.hpp"
#include "core/device.hpp"

namespace dtrain {
namespace {

// Zeros of the config's example shape; every label is class 0; text batches list `row_nonzeros` non-zeros
// a row, of value 1, spread evenly over the columns as a text's words are over a vocabulary (so each column
// block of a sharded product gets its share, and a product over the dense block finds it as sparse as the
// CPU GEMM finds a real one: core/kernels/dry_run/).
class ZerosSource : public train::BatchSource {
 public:
  ZerosSource(Shape example, int64_t examples, bool sparse, int64_t row_nonzeros)
      : example_(std::move(example)), examples_(examples), sparse_(sparse), row_nonzeros_(row_nonzeros) {}
  int64_t num_examples() const override { return examples_; }
  Shape example_shape() const override { return example_; }
  std::vector<int64_t> order(int64_t) const override {
    std::vector<int64_t> ids(static_cast<size_t>(examples_));
    for (int64_t i = 0; i < examples_; ++i) ids[size_t(i)] = i;
    return ids;
  }
  void fill_features(std::span<const int64_t>, int64_t row_begin, int64_t row_end, int64_t column_begin,
                     int64_t column_end, float* out) const override {
    std::fill(out, out + (row_end - row_begin) * (column_end - column_begin), 0.0f);
  }
  std::shared_ptr<const CompressedRows> compressed_features(std::span<const int64_t>, int64_t row_begin, int64_t row_end,
                                                            int64_t column_begin, int64_t column_end) const override {
    if (!sparse_) return nullptr;
    auto rows = std::make_shared<CompressedRows>();
    rows->rows = row_end - row_begin;
    rows->cols = column_end - column_begin;
    const int64_t per_row = std::min(row_nonzeros_, rows->cols);
    rows->row_starts.resize(size_t(rows->rows + 1));
    for (int64_t r = 0; r <= rows->rows; ++r) rows->row_starts[size_t(r)] = r * per_row;
    rows->entries.resize(size_t(rows->rows * per_row));
    for (int64_t r = 0; r < rows->rows; ++r)
      for (int64_t j = 0; j < per_row; ++j)
        rows->entries[size_t(r * per_row + j)] = SparseEntry{int32_t(j * rows->cols / per_row), 1.0f};
    return rows;
  }
  void fill_labels(std::span<const int64_t>, int64_t row_begin, int64_t row_end, float* out) const override {
    std::fill(out, out + (row_end - row_begin), 0.0f);
  }

 private:
  Shape example_;
  int64_t examples_;
  bool sparse_;
  int64_t row_nonzeros_;
};

// The non-zeros of a TF-IDF row: an IMDB review has about 230 distinct words (measured on aclImdb's train
// split), most of them in the vocabulary of a few thousand words that a config keeps.
constexpr int64_t kTextRowNonzeros = 128;

}  // namespace

DryStep dry_step(const Config& config, MemoryUse use, bool dry, int64_t steps) {
  train::TrainOptions one_step = train_options(config);
  one_step.epochs = steps;  // one batch an epoch (the zeros are one batch long)
  one_step.max_steps = steps;
  one_step.eval_every_epoch = false;
  one_step.devices = Place::Kind::Cpu;
  one_step.in_process = true;
  one_step.validation = {};
  one_step.profile = {};  // a dry run's step is no step of the run
  Engine engine = build_engine(config, one_step, std::nullopt);
  const int devices = engine.mesh->size();
  DryStep step;
  step.collectives.resize(size_t(devices));
  std::vector<std::unique_ptr<CountingCommunicator>> counters(static_cast<size_t>(devices));
  train::Hooks hooks;
  hooks.on_start = [&](train::RankState& state) {
    DeviceContext& device = current_device();
    counters[size_t(state.rank)] = std::make_unique<CountingCommunicator>(*device.comm);
    device.comm = counters[size_t(state.rank)].get();
  };
  ZerosSource zeros(engine.example, config.data.batch_size, is_text(config.data.dataset), kTextRowNonzeros);
  train::Reporter quiet;
  {
    std::optional<dry_run::Scope> scope;
    if (dry) scope.emplace(devices);
    if (use == MemoryUse::eval)
      engine.trainer->evaluate(zeros, quiet, hooks);
    else
      engine.trainer->train(zeros, nullptr, quiet, hooks);
    if (scope) step.tally = scope->tally();
  }
  for (int rank = 0; rank < devices; ++rank)
    if (counters[size_t(rank)]) step.collectives[size_t(rank)] = counters[size_t(rank)]->calls();
  return step;
}

}  // namespace dtrain

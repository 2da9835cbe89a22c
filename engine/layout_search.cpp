#include "engine/layout_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "engine/dry_step.hpp"
#include "engine/memory_plan.hpp"
#include "engine/model_builder.hpp"
#include "engine/step_time.hpp"

namespace dtrain {
namespace {

using SpecList = std::vector<std::string>;
using Layouts = std::map<std::string, SpecList>;  // variable path -> specs, every kernel named

struct MeshShape {
  std::vector<std::string> names;
  std::vector<int> sizes;
  std::string text() const {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) out += fmt::format("{}{}: {}", i ? ", " : "", names[i], sizes[i]);
    return "{" + out + "}";
  }
};

// Every assignment of sizes to `names` whose product is `devices`.
std::vector<MeshShape> factorizations(const std::vector<std::string>& names, int devices) {
  std::vector<MeshShape> out;
  MeshShape current{names, std::vector<int>(names.size(), 1)};
  std::function<void(size_t, int)> place = [&](size_t dim, int left) {
    if (dim + 1 == names.size()) {
      current.sizes[dim] = left;
      out.push_back(current);
      return;
    }
    for (int size = 1; size <= left; ++size) {
      if (left % size) continue;
      current.sizes[dim] = size;
      place(dim + 1, left / size);
    }
  };
  if (!names.empty()) place(0, devices);
  return out;
}

std::string specs_text(const SpecList& specs) { return "[" + fmt::format("{}", fmt::join(specs, ", ")) + "]"; }

std::vector<std::string> candidate_overrides(const MeshShape& dims, const Layouts& layouts, int64_t accumulation) {
  std::string rules;
  for (const auto& [path, specs] : layouts)
    rules += fmt::format("{}{}: {}", rules.empty() ? "" : ", ", path, specs_text(specs));
  std::vector<std::string> sets{"mesh.dims=" + dims.text(), "layouts={" + rules + "}"};
  if (accumulation > 1) sets.push_back(fmt::format("train.accumulation_steps={}", accumulation));
  return sets;
}

class Planner {
 public:
  Planner(std::string path, std::vector<std::string> base, int processes, const Calibration& calibration)
      : path_(std::move(path)), base_(std::move(base)), processes_(std::max(1, processes)), calibration_(calibration) {}

  // The candidate's plan, or nullopt when the engine refuses it (indivisible shapes, a layout rule on a dim of 1).
  std::optional<SearchCandidate> plan(const std::vector<std::string>& extra) {
    std::vector<std::string> overrides = base_;
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    const std::string key = fmt::format("{}", fmt::join(extra, "\n"));
    if (auto seen = cache_.find(key); seen != cache_.end()) return seen->second;
    std::optional<SearchCandidate> result;
    try {
      const Config config = load_config(path_, LoadOptions{overrides, "", false, "", {}});
      const Engine engine = build_engine(config, train_options(config), std::nullopt);
      const Placement placement = placement_of(engine.mesh->size(), processes_, 0);
      const DryStep step = dry_step(config);
      const MemoryPlan memory = memory_plan(config, *engine.built.model, placement, MemoryUse::train, &step);
      const StepTime time = predict_on_this_machine(step, placement, engine.devices, calibration_);
      SearchCandidate candidate;
      candidate.overrides = extra;
      candidate.step_seconds = time.step_s;
      candidate.examples_per_second = time.examples_per_s(config.data.batch_size);
      candidate.peak_bytes_per_process = memory.process_peak();
      const int64_t available = available_memory_bytes();
      candidate.fits = config.mesh.devices == DeviceKind::gpu || available <= 0 || memory.process_peak() <= double(available);
      MeshShape dims{config.mesh.dim_names(), config.mesh.dim_sizes()};
      candidate.mesh = dims.text();
      result = candidate;
      ++evaluated;
    } catch (const std::exception&) {
      ++refused;
    }
    cache_[key] = result;
    return result;
  }

  int evaluated = 0, refused = 0;

 private:
  std::string path_;
  std::vector<std::string> base_;
  int processes_;
  const Calibration& calibration_;
  std::map<std::string, std::optional<SearchCandidate>> cache_;
};

}  // namespace

SearchResult search_layouts(const std::string& config_path, const std::vector<std::string>& overrides, int processes,
                            const Calibration& calibration, int keep) {
  const Config config = load_config(config_path, LoadOptions{overrides, "", false, "", {}});
  const Engine engine = build_engine(config, train_options(config), std::nullopt);
  Planner planner(config_path, overrides, processes, calibration);
  SearchResult result;
  const std::optional<SearchCandidate> given = planner.plan({});
  DTRAIN_CHECK_USAGE(given.has_value(), "plan --search: the config itself cannot be planned");
  result.config = *given;

  // The mesh dims: the config's, and `model` for the weights when it has none.
  std::vector<std::string> names = config.mesh.dim_names();
  if (std::find(names.begin(), names.end(), "model") == names.end()) names.push_back("model");
  // Weights shard over the dims the data layout leaves free (the batch and sequence dims move activations).
  const std::set<std::string> data_dims(config.data.layout.begin(), config.data.layout.end());
  // The kernels (rank >= 2 trainable variables) and the config's own layouts of them.
  Layouts start;
  for (const nn::VariableInfo& info : engine.built.model->variables()) {
    // A bias follows its kernel's layout: not a choice of its own.
    if (!info.trainable || info.shape.size() < 2 || info.choice.reason.rfind("follows", 0) == 0) continue;
    start[info.path] = info.choice.layout.specs();
  }
  std::vector<SearchCandidate> found;
  for (const MeshShape& dims : factorizations(names, config.mesh.num_devices())) {
    std::vector<std::string> weight_dims;
    for (size_t d = 0; d < dims.names.size(); ++d)
      if (dims.sizes[d] > 1 && !data_dims.count(dims.names[d])) weight_dims.push_back(dims.names[d]);
    // The config's layouts where this mesh still has their dims; replicated otherwise.
    Layouts current = start;
    for (auto& [path, specs] : current)
      for (std::string& spec : specs)
        if (spec != "unsharded" && std::find(weight_dims.begin(), weight_dims.end(), spec) == weight_dims.end())
          spec = "unsharded";
    const auto evaluate = [&](const Layouts& layouts) -> std::optional<SearchCandidate> {
      for (int64_t accumulation : {1, 2, 4}) {
        std::optional<SearchCandidate> candidate = planner.plan(candidate_overrides(dims, layouts, accumulation));
        if (!candidate) return std::nullopt;  // refused: more micro-batches will not mend the shapes
        if (candidate->fits) return candidate;
      }
      return std::nullopt;
    };
    std::optional<SearchCandidate> best = evaluate(current);
    // Coordinate descent: each kernel in turn takes its fastest option, the others held; until none moves.
    for (int pass = 0; pass < 3; ++pass) {
      bool moved = false;
      for (auto& [path, specs] : current) {
        SpecList chosen = specs;
        std::vector<SpecList> options{SpecList(specs.size(), "unsharded")};
        for (size_t axis = 0; axis < specs.size(); ++axis)
          for (const std::string& dim : weight_dims) {
            SpecList option(specs.size(), "unsharded");
            option[axis] = dim;
            options.push_back(option);
          }
        for (const SpecList& option : options) {
          if (option == chosen) continue;
          specs = option;
          const std::optional<SearchCandidate> candidate = evaluate(current);
          if (candidate && (!best || candidate->step_seconds < best->step_seconds)) {
            best = candidate;
            chosen = option;
            moved = true;
          }
        }
        specs = chosen;
      }
      if (!moved) break;
    }
    if (best) found.push_back(*best);
  }
  result.evaluated = planner.evaluated;
  result.refused = planner.refused;
  std::sort(found.begin(), found.end(),
            [](const SearchCandidate& a, const SearchCandidate& b) { return a.step_seconds < b.step_seconds; });
  if (found.size() > size_t(keep)) found.resize(size_t(keep));
  result.best = found;
  return result;
}

}  // namespace dtrain

// Checkpoint test fixtures: variables of several shapes with known values, meshes that lay them out in
// different ways, and save/restore of whole models through the checkpoint manager (under mpirun too: a
// restore gathers every rank's shards to every process).
#pragma once
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/device.hpp"
#include "tests/spmd_harness.hpp"
#include "tests/temp_folder.hpp"

namespace dtrain::testing {

using TempDir = TempFolder;

struct VariableDef {
  std::string path;
  Shape shape;
  bool trainable;
};

inline const std::vector<VariableDef> kVariables{{"dense1/kernel", {16, 24}, true},
                                          {"dense1/bias", {24}, true},
                                          {"bn/moving_mean", {24}, false},
                                          {"dense2/kernel", {24, 8}, true},
                                          {"odd/kernel", {7, 5}, true},  // replicated: 35 values, odd chunks
                                          {"conv/kernel", {8, 4, 6}, true}};

// One mesh and a layout per variable that uses its dims in different ways (slots follow their variable).
struct MeshCase {
  std::string name;
  MeshPtr mesh;
  std::map<std::string, std::vector<std::string>> specs;
};

inline std::vector<MeshCase> mesh_cases() {
  const std::string u = kUnsharded;
  return {
      {"{1}", make_mesh({"x"}, {1}),
       {{"dense1/kernel", {"x", u}}, {"dense1/bias", {u}}, {"bn/moving_mean", {u}}, {"dense2/kernel", {u, "x"}},
        {"conv/kernel", {u, u, u}}}},
      {"{8}", make_mesh({"x"}, {8}),
       {{"dense1/kernel", {"x", u}}, {"dense1/bias", {"x"}}, {"bn/moving_mean", {u}}, {"dense2/kernel", {u, "x"}},
        {"conv/kernel", {"x", u, u}}}},
      {"{4,2}", make_mesh({"x", "y"}, {4, 2}),
       {{"dense1/kernel", {"y", "x"}}, {"dense1/bias", {"x"}}, {"bn/moving_mean", {"y"}}, {"dense2/kernel", {"x", u}},
        {"conv/kernel", {u, "x", "y"}}}},
      {"{2,2,2}", make_mesh({"x", "y", "z"}, {2, 2, 2}),
       {{"dense1/kernel", {"z", "x"}}, {"dense1/bias", {"y"}}, {"bn/moving_mean", {u}}, {"dense2/kernel", {"x", "z"}},
        {"conv/kernel", {"y", u, "x"}}}},
  };
}

inline Shape shape_of(const std::string& path) {
  for (const auto& def : kVariables)
    if (def.path == path) return def.shape;
  FAIL("no variable " << path);
  return {};
}

inline Tensor value_of(const std::string& name, const Shape& shape) {
  int seed = 7;
  for (char c : name) seed = (seed * 31 + c) % 100003;
  return testing::test_tensor(shape, seed);
}

// A rank's state on `mesh`: variables and Adam slots hold value_of(name) when `filled`, else zeros. The
// optimizer flat-shards the update (and slots) of variables of min_sharded values or more (1: every variable
// with a data-parallel dim, e.g. odd/kernel's 35 values in chunks of 5 on 8 ranks, the last padded).
struct RankModel {
  nn::Parameters params;
  std::unique_ptr<optim::Optimizer> optimizer;
  train::Position position;
};

inline RankModel make_state(const MeshCase& mesh_case, int rank, bool filled, const std::vector<VariableDef>& defs = kVariables,
                     int64_t min_sharded = 1) {
  RankModel state;
  for (const auto& def : defs) {
    Layout layout(mesh_case.specs.count(def.path) ? mesh_case.specs.at(def.path)
                                                  : std::vector<std::string>(def.shape.size(), kUnsharded),
                  mesh_case.mesh);
    Tensor global = filled ? value_of("variables/" + def.path, def.shape) : Tensor(def.shape);
    state.params.add(def.path, Var(DTensor(def.shape, layout, pack(global, layout, rank)), def.trainable));
  }
  state.optimizer = optim::make_adam({});
  state.optimizer->build(state.params, min_sharded);
  if (filled) {
    for (auto& [name, slot] : state.optimizer->slots()) {
      Tensor global = value_of("optimizer/" + name, slot->global_shape());
      slot->local() = pack(global, slot->layout(), rank);
    }
    // An apply() without gradients changes no variable but takes the slots written above back into the
    // optimizer's chunks: the save then gathers them again.
    state.optimizer->apply(state.params);
    state.optimizer->set_iterations(7);
    state.position = {5, 1, 2};
  }
  return state;
}

inline checkpoint::SaveContext test_context(const std::string& run_id = "test-run") {
  return {run_id, "mesh: {}\n", 9, {"[UNK]", "movie"}, {1.5f, 2.25f}};
}

inline void save_on(const MeshCase& mesh_case, const std::string& dir, int max_to_keep = 3, int64_t step = 5,
             int64_t min_sharded = 1) {
  checkpoint::CheckpointManager manager(dir, max_to_keep, test_context());
  run_spmd(mesh_case.mesh, [&](DeviceContext& device) {
    RankModel state = make_state(mesh_case, device.rank, true, kVariables, min_sharded);
    state.position.step = step;
    train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
    manager.save(rank_state, false);
  });
}

// Restores the latest checkpoint in `dir` onto `mesh_case`; returns every tensor unpacked to its global value.
inline std::map<std::string, Tensor> restore_on(const MeshCase& mesh_case, const std::string& dir, train::Position* position = nullptr,
                                         int64_t* iterations = nullptr, int64_t min_sharded = 1) {
  checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(dir));
  const int n = mesh_case.mesh->size();
  std::map<std::string, std::vector<Tensor>> locals;
  std::map<std::string, std::pair<Shape, Layout>> meta;
  std::mutex mutex;
  run_spmd(mesh_case.mesh, [&](DeviceContext& device) {
    RankModel state = make_state(mesh_case, device.rank, false, kVariables, min_sharded);
    train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
    checkpoint::restore(index, rank_state, true);
    const int64_t restored_iterations = state.optimizer->iterations();  // before the apply() below counts one
    // Through the optimizer's chunks and back: an apply() without gradients slices the restored slots into
    // this rank's chunks, slot_tensors() gathers them again.
    state.optimizer->apply(state.params);
    std::vector<checkpoint::NamedTensor> all = checkpoint::variable_tensors(state.params);
    for (auto& slot : checkpoint::slot_tensors(*state.optimizer)) all.push_back(slot);
    // Under mpirun a process holds only its ranks' shards: every rank's, gathered, for the checks.
    std::vector<std::vector<Tensor>> gathered;
    for (auto& named : all)
      gathered.push_back(process_count() > 1 ? testing::gather_locals(device, named.tensor->local())
                                              : std::vector<Tensor>{named.tensor->local()});
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t t = 0; t < all.size(); ++t) {
      auto& slots = locals[all[t].name];
      slots.resize(n);
      if (process_count() > 1) slots = gathered[t];
      else slots[device.rank] = gathered[t][0];
      meta.insert({all[t].name, {all[t].tensor->global_shape(), all[t].tensor->layout()}});
    }
    if (position) *position = state.position;  // the same on every rank
    if (iterations) *iterations = restored_iterations;
  });
  std::map<std::string, Tensor> globals;
  for (auto& [name, shards] : locals) globals[name] = unpack(meta.at(name).first, meta.at(name).second, shards);
  return globals;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(float) * size_t(a.size())) == 0);
}

}  // namespace dtrain::testing

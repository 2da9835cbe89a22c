// Meshes spread over processes, c10d style: run plainly, each case re-executes this test binary under
// `mpirun -np P` on itself and checks that every process passed; under mpirun, each process runs the case's
// checks on the ranks it holds: collectives against plain loops over the inputs, training and checkpoints
// against the same program run with every rank in one process.
// (The SPMD op and gradient suites also run under mpirun: see the mpi.* entries in CMakeLists.txt.)
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/mpi/hierarchical.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "tests/checkpoint_fixture.hpp"
#include "tests/mpi_launch.hpp"
#include "tests/temp_folder.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Runs this file's test case `name` under `mpirun -np processes`.
void launch(int processes, const std::string& name, const std::string& mpirun_options = "",
            const std::string& environment = "") {
  testing::launch("test_mpi.cpp", processes, name, mpirun_options, environment);
}

// Everything one rank saw, in call order: each collective's result on integer-valued floats (so sums are
// exact and every correct order of summation gives the same bits).
using Record = std::vector<float>;

void record(Record& out, const float* values, size_t count) { out.insert(out.end(), values, values + count); }

// What world rank `who` contributes at element i of the collective numbered `salt`.
float value(int who, size_t i, int salt) { return float((who * 7 + int(i % 11) * 3 + salt) % 64); }
// Member m's count in all_gather_varying: members send different counts (one sends none).
size_t varying_count(int member, size_t count) { return size_t(member % 3) * count / 2; }

// Every collective on `group`, with `count` floats per member and rank-dependent values.
void exercise(const DeviceContext& device, const Group& group, size_t count, Record& out) {
  Communicator& comm = *device.comm;
  const int rank = device.rank, n = group.size();
  // Ranks arrive in a different order in each process: the in-process parts must not depend on it.
  if (rank % 3 == 1) std::this_thread::sleep_for(std::chrono::microseconds(100));

  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = value(rank, i, 1);
  comm.all_reduce(group, host_view(data), ReduceOp::Sum);
  record(out, data.data(), count);
  for (size_t i = 0; i < count; ++i) data[i] = value(rank, i, 2);
  comm.all_reduce(group, host_view(data), ReduceOp::Max);
  record(out, data.data(), count);

  std::vector<float> send(count), gathered(count * size_t(n), -1.0f);
  for (size_t i = 0; i < count; ++i) send[i] = value(rank, i, 3);
  comm.all_gather(group, host_view(send), host_view(gathered));
  record(out, gathered.data(), gathered.size());
  std::shared_ptr<const float[]> shared = comm.all_gather_shared(group, host_view(send));
  record(out, shared.get(), count * size_t(n));
  shared = comm.all_gather_shared_in_place(group, count, [&](BufferView chunk) {
    for (size_t i = 0; i < count; ++i) chunk.data[i] = value(rank, i, 4);
  });
  record(out, shared.get(), count * size_t(n));

  std::vector<float> chunks(count * size_t(n)), reduced(count, -1.0f);
  for (size_t i = 0; i < chunks.size(); ++i) chunks[i] = value(rank, i, 5);
  comm.reduce_scatter(group, host_view(chunks), host_view(reduced));
  record(out, reduced.data(), count);

  std::vector<float> incoming(count * size_t(n), -1.0f);
  for (size_t i = 0; i < chunks.size(); ++i) chunks[i] = value(rank, i, 6) + float(i / count) * 100.0f;
  comm.all_to_all(group, host_view(chunks), host_view(incoming));
  record(out, incoming.data(), incoming.size());

  for (int root : {0, n / 2, n - 1}) {
    for (size_t i = 0; i < count; ++i) data[i] = value(rank, i, 7 + root);
    comm.broadcast(group, host_view(data), root);
    record(out, data.data(), count);
  }

  const size_t mine = varying_count(group.index, count);
  std::vector<float> varying(std::max<size_t>(mine, 1));
  for (size_t i = 0; i < mine; ++i) varying[i] = value(rank, i, 9);
  VaryingGather result;
  comm.all_gather_varying(group, host_view(varying.data(), mine), result);
  REQUIRE(result.counts.size() == size_t(n));
  for (int member = 0; member < n; ++member) {
    out.push_back(float(result.counts[size_t(member)]));
    record(out, result.members[size_t(member)], result.counts[size_t(member)]);
  }
  comm.barrier(group);
}

// What exercise() must record for member `index` of a group of world ranks `ranks`: plain loops over the
// values every member sent, no communicator.
Record expected(const std::vector<int>& ranks, int index, size_t count) {
  const int n = int(ranks.size());
  Record out;
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int who : ranks) sum += value(who, i, 1);
    out.push_back(sum);
  }
  for (size_t i = 0; i < count; ++i) {
    float most = value(ranks[0], i, 2);
    for (int who : ranks) most = std::max(most, value(who, i, 2));
    out.push_back(most);
  }
  for (int salt : {3, 3, 4})  // all_gather, all_gather_shared, all_gather_shared_in_place
    for (int who : ranks)
      for (size_t i = 0; i < count; ++i) out.push_back(value(who, i, salt));
  for (size_t i = 0; i < count; ++i) {  // reduce_scatter: chunk `index` of every member's send, summed
    float sum = 0;
    for (int who : ranks) sum += value(who, size_t(index) * count + i, 5);
    out.push_back(sum);
  }
  for (int who : ranks)  // all_to_all: chunk `index` of each member's send
    for (size_t i = 0; i < count; ++i) out.push_back(value(who, size_t(index) * count + i, 6) + float(index) * 100.0f);
  for (int root : {0, n / 2, n - 1})
    for (size_t i = 0; i < count; ++i) out.push_back(value(ranks[size_t(root)], i, 7 + root));
  for (int member = 0; member < n; ++member) {
    const size_t length = varying_count(member, count);
    out.push_back(float(length));
    for (size_t i = 0; i < length; ++i) out.push_back(value(ranks[size_t(member)], i, 9));
  }
  return out;
}

// Meshes whose groups cross processes in every way: along the first dims, the last, all; {3,4} over 4
// processes gives groups whose processes hold different numbers of members.
std::vector<MeshPtr> spread_meshes() {
  std::vector<MeshPtr> out;
  for (MeshPtr mesh : {make_mesh({"x"}, {8}), make_mesh({"x", "y"}, {4, 2}), make_mesh({"x", "y"}, {2, 4}),
                       make_mesh({"x", "y", "z"}, {2, 2, 2}), make_mesh({"x", "y"}, {3, 4}), make_mesh({"x"}, {6})})
    if (mesh->size() % process_count() == 0) out.push_back(mesh);
  return out;
}

void check_collectives_across_processes() {
  REQUIRE(process_count() >= 2);
  int compared = 0;
  for (MeshPtr mesh : spread_meshes()) {
    const std::vector<std::string>& names = mesh->dim_names();
    for (uint32_t subset = 1; subset < (1u << names.size()); ++subset) {
      std::vector<std::string> dims;
      for (size_t d = 0; d < names.size(); ++d)
        if (subset & (1u << d)) dims.push_back(names[d]);
      // The in-process staged and shared paths, and (20000) the summing stage of spanning all_reduce.
      for (size_t count : {size_t(7), size_t(5000), size_t(20000)}) {
        std::vector<Record> spread(size_t(mesh->size()));
        std::vector<Group> groups(size_t(mesh->size()));
        run_spmd(mesh, [&](DeviceContext& device) {
          groups[size_t(device.rank)] = device.group(dims);
          exercise(device, device.group(dims), count, spread[size_t(device.rank)]);
        });
        const Placement placement = placement_of(mesh->size());
        for (int rank = placement.first; rank < placement.first + placement.local; ++rank) {
          INFO("mesh ", mesh->to_string(), " group along ", fmt::format("{}", fmt::join(dims, ",")), " count ", count,
               " rank ", rank);
          const Group& group = groups[size_t(rank)];
          REQUIRE(!spread[size_t(rank)].empty());
          CHECK(spread[size_t(rank)] == expected(group.ranks, group.index, count));
          ++compared;
        }
      }
    }
  }
  MESSAGE("process " << process_index() << ": " << compared << " rank/group/size cases equal to the plain loops");
  CHECK(compared > 0);
}

}  // namespace

TEST_CASE("needs mpirun: collectives across 2 and 4 processes give the results of plain loops on every group of 6 meshes") {
  if (mpi_launched()) return check_collectives_across_processes();
  if (!can_launch()) return;
  launch(2, "needs mpirun: collectives across 2 and 4 processes*");
  launch(4, "needs mpirun: collectives across 2 and 4 processes*");
}

TEST_CASE("needs mpirun: collectives over TCP only (the path between machines) give the results of plain loops") {
  if (mpi_launched()) return check_collectives_across_processes();
  if (!can_launch()) return;
  launch(2, "needs mpirun: collectives over TCP only*", "--mca btl self,tcp");
}

TEST_CASE("placement: one process holds every device") {
  const Placement alone = placement_of(8);
  CHECK(alone.processes == 1);
  CHECK(alone.local == 8);
  CHECK(alone.describe() == "process 0: devices 0-7");
}

TEST_CASE("needs mpirun: placement gives contiguous device blocks, and a process count that does not divide the mesh is refused") {
  if (mpi_launched()) {
    const Placement placement = placement_of(8);
    CHECK(placement.local == 8 / process_count());
    CHECK(placement.first == process_index() * placement.local);
    if (process_count() == 2) CHECK(placement.describe() == "process 0: devices 0-3; process 1: devices 4-7");
    const std::string refusal = fmt::format("a mesh of {} devices cannot be spread over {} processes",
                                            process_count() + 1, process_count());
    CHECK_THROWS_WITH_AS(run_spmd(make_mesh({"x"}, {process_count() + 1}), [](DeviceContext&) {}),
                         doctest::Contains(refusal.c_str()), UsageError);
    return;
  }
  if (!can_launch()) return;
  launch(2, "needs mpirun: placement gives*");
}

// Reference losses come from the launching process (one process, every rank in it); each process count
// must give them again, 1e-5 relative.
namespace {

struct TrainingCase {
  std::string config;
  std::vector<std::string> overrides;
  bool images;
  int64_t steps;
};

std::vector<TrainingCase> training_cases() {
  const std::vector<std::string> flat{"data.image_shape=flat", "data.layout=[batch, unsharded]"};
  return {{"mnist_core_dp.yaml", flat, true, 30},
          {"mnist_mp.yaml", flat, true, 30},
          {"imdb_dp.yaml", {}, false, 60},
          {"imdb_mp.yaml", {}, false, 60},
          {"imdb_sp.yaml", {}, false, 60},
          {"imdb_dp_adam.yaml", {}, false, 60}};
}

std::vector<double> train_case(const TrainingCase& training) {
  static const data::Dataset images = generated(128 * 30, 784, 10, false);
  static const data::Dataset reviews = generated(64 * 60, 1200, 2, true);
  return step_losses(training.config, training.overrides, training.images ? images : reviews, training.steps);
}

}  // namespace

TEST_CASE("needs mpirun: the shipped MNIST and IMDB configs give the same per-step losses on 1, 2, 4 and 8 processes") {
  const char* reference_file = std::getenv("DTRAIN_TEST_REFERENCE_LOSSES");
  if (mpi_launched()) {
    REQUIRE(reference_file != nullptr);
    std::ifstream in(reference_file);
    for (const TrainingCase& training : training_cases()) {
      size_t count = 0;
      in >> count;
      std::vector<double> reference(count);
      for (double& loss : reference) in >> loss;
      REQUIRE(!in.fail());
      const std::vector<double> losses = train_case(training);
      if (process_index() == 0) {  // process 0 holds device 0, which reports
        check_same_losses(reference, losses, fmt::format("{} on {} processes", training.config, process_count()), 1e-5);
      }
    }
    return;
  }
  TempFolder folder("mpi_losses");
  const std::string path = (folder / "losses.txt").string();
  {
    std::ofstream out(path);
    out.precision(17);
    for (const TrainingCase& training : training_cases()) {
      const std::vector<double> losses = train_case(training);
      REQUIRE(losses.size() == size_t(training.steps));
      CHECK(losses.back() < losses.front());  // it learns
      out << losses.size();
      for (double loss : losses) out << ' ' << loss;
      out << '\n';
    }
  }
  if (!can_launch()) return;
  for (int processes : {2, 4, 8})
    launch(processes, "needs mpirun: the shipped MNIST and IMDB configs*", "", "DTRAIN_TEST_REFERENCE_LOSSES='" + path + "'");
}

// A checkpoint saved under one process count restores bitwise under another, onto every mesh: variables,
// Adam slots (flat-sharded in the optimizer), step and data position. The launching process saves and
// restores with every rank in it; the processes under mpirun save and restore spread.
namespace {

// Restores `dir` onto every mesh the processes divide and checks every value bitwise.
void check_restores(const std::string& dir) {
  for (const MeshCase& restored : mesh_cases()) {
    if (restored.mesh->size() % process_count() != 0) continue;
    CAPTURE(restored.name);
    CAPTURE(dir);
    train::Position position;
    int64_t iterations = 0;
    std::map<std::string, Tensor> globals = restore_on(restored, dir, &position, &iterations);
    CHECK(globals.size() == 6 + 2 * 5);
    for (auto& [name, value] : globals) {
      CAPTURE(name);
      CHECK(bitwise_equal(value, value_of(name, value.shape())));
    }
    CHECK(position.step == 5);
    CHECK(position.batch_in_epoch == 2);
    CHECK(iterations == 7);
  }
}

const MeshCase& mesh_case(const std::string& name) {
  static const std::vector<MeshCase> cases = mesh_cases();
  for (const MeshCase& found : cases)
    if (found.name == name) return found;
  FAIL("no mesh case " << name);
  return cases.front();
}

}  // namespace

TEST_CASE("needs mpirun: checkpoints move between 1, 2 and 4 processes and between meshes, bitwise") {
  const char* folder = std::getenv("DTRAIN_TEST_CHECKPOINTS");
  if (mpi_launched()) {
    REQUIRE(folder != nullptr);
    const std::string root = folder;
    if (process_count() == 4) {  // restore the one-process checkpoint spread over 4, then save one spread
      check_restores(root + "/from1");
      save_on(mesh_case("{2,2,2}"), root + "/from4");
      check_restores(root + "/from4");
    } else {  // 2 processes: restore the 4-process one, save on {4,2}
      check_restores(root + "/from4");
      save_on(mesh_case("{4,2}"), root + "/from2");
    }
    return;
  }
  if (!can_launch()) return;
  TempFolder root("mpi_checkpoints");
  save_on(mesh_case("{8}"), (root / "from1").string());
  const std::string environment = "DTRAIN_TEST_CHECKPOINTS='" + root.str() + "'";
  launch(4, "needs mpirun: checkpoints move between*", "", environment);
  launch(2, "needs mpirun: checkpoints move between*", "", environment);
  check_restores((root / "from2").string());  // written by 2 processes, read by one, onto {1}, {8}, {4,2}, {2,2,2}
  check_restores((root / "from4").string());
}

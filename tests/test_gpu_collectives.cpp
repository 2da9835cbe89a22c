// The device-memory in-process communicator (DeviceLocalWorld) and the host one (LocalWorld) against plain loops
// over the inputs: every collective, on every group of meshes of 1 to 8 ranks, bit for bit (sums of random
// floats, so the member order shows). Without a GPU the world is simulated (host memory, the CPU collective kernels, devices as labels), which
// runs every path of the communicator, cross-device copies included; the "needs a GPU" cases run the same on
// real device memory. Also the collective kernels' passes, mismatches and abort.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/comm/local/device_local.hpp"
#include "core/comm/nccl/gpu.hpp"
#include "core/comm/local/local.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/comm/span_layout.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/kernels/collective/collective.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "core/kernels/cuda/device_memory.hpp"
#include "core/mesh.hpp"

using namespace dtrain;

namespace {

enum class Op { SumAll, MaxAll, Gather, Shared, InPlace, Varying, ReduceScatter, AllToAll, Broadcast, Barrier };
const Op kOps[] = {Op::SumAll, Op::MaxAll,        Op::Gather,   Op::Shared,    Op::InPlace,
                   Op::Varying, Op::ReduceScatter, Op::AllToAll, Op::Broadcast, Op::Barrier};

const char* op_name(Op op) {
  switch (op) {
    case Op::SumAll: return "all_reduce(sum)";
    case Op::MaxAll: return "all_reduce(max)";
    case Op::Gather: return "all_gather";
    case Op::Shared: return "all_gather_shared";
    case Op::InPlace: return "all_gather_shared_in_place";
    case Op::Varying: return "all_gather_varying";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::AllToAll: return "all_to_all";
    case Op::Broadcast: return "broadcast";
    case Op::Barrier: return "barrier";
  }
  return "?";
}

// Where a rank's buffers live: host memory, or CUDA device `device` (blocking copies on the rank's stream).
struct Memory {
  bool gpu = false;
  int device = 0;

  std::shared_ptr<float[]> make(const std::vector<float>& values) const {
    std::shared_ptr<float[]> buffer;
    if (gpu) {
      buffer = kernels::cuda_allocate_floats(device, values.size());
      kernels::cuda_copy_to_device(device, buffer.get(), values.data(), values.size());
    } else {
      buffer.reset(new float[std::max<size_t>(values.size(), 1)]);
      if (!values.empty()) std::memcpy(buffer.get(), values.data(), values.size() * sizeof(float));
    }
    return buffer;
  }
  void write(float* to, const std::vector<float>& values) const {
    if (gpu)
      kernels::cuda_copy_to_device(device, to, values.data(), values.size());
    else if (!values.empty())
      std::memcpy(to, values.data(), values.size() * sizeof(float));
  }
  std::vector<float> read(const float* from, size_t count) const {
    std::vector<float> values(count);
    if (gpu)
      kernels::cuda_copy_to_host(device, values.data(), from, count);
    else if (count > 0)
      std::memcpy(values.data(), from, count * sizeof(float));
    return values;
  }
};

// Rank `rank`'s input: random floats (so a sum's bits depend on its order), with a NaN, infinities and signed
// zeros among them for max.
// integer_inputs: small integers instead, whose sums are exact in any order (NCCL's order is its own).
bool integer_inputs = false;

std::vector<float> input(int rank, size_t count, uint32_t salt) {
  if (integer_inputs) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = float((rank * 131 + int(i % 977) + int(salt)) % 1000 - 500);
    return values;
  }
  std::mt19937 random(uint32_t(rank) * 7919u + uint32_t(count) * 31u + salt);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(random);
  if (count > 5) {
    values[1] = rank % 2 ? 0.0f : -0.0f;
    values[2] = rank == 1 ? std::numeric_limits<float>::quiet_NaN() : values[2];
    values[3] = rank == 2 ? std::numeric_limits<float>::infinity() : values[3];
    values[4] = -std::numeric_limits<float>::infinity();
  }
  return values;
}

// One collective on `group` by one rank, its result read back to the host.
std::vector<float> run_op(Op op, Communicator& comm, const Group& group, size_t count, const Memory& memory) {
  const size_t n = size_t(group.size());
  const int rank = comm.rank();
  // The memory is where the communicator's buffers live (host memory labelled cuda:k in a simulated world).
  const auto at = [&](const std::shared_ptr<float[]>& buffer, size_t length) {
    return BufferView{buffer.get(), length, comm.place()};
  };
  switch (op) {
    case Op::SumAll:
    case Op::MaxAll: {
      auto data = memory.make(input(rank, count, 1));
      comm.all_reduce(group, at(data, count), op == Op::SumAll ? ReduceOp::Sum : ReduceOp::Max);
      return memory.read(data.get(), count);
    }
    case Op::Gather: {
      auto send = memory.make(input(rank, count, 2));
      auto recv = memory.make(std::vector<float>(n * count, -7.0f));
      comm.all_gather(group, at(send, count), at(recv, n * count));
      return memory.read(recv.get(), n * count);
    }
    case Op::Shared: {
      auto send = memory.make(input(rank, count, 3));
      auto result = comm.all_gather_shared(group, at(send, count));
      return memory.read(result.get(), n * count);
    }
    case Op::InPlace: {
      const std::vector<float> mine = input(rank, count, 4);
      auto result =
          comm.all_gather_shared_in_place(group, count, [&](BufferView chunk) { memory.write(chunk.data, mine); });
      return memory.read(result.get(), n * count);
    }
    case Op::Varying: {
      const size_t own = count + size_t(group.index) * 3;  // each member its own count
      auto send = memory.make(input(rank, own, 5));
      VaryingGather out;
      comm.all_gather_varying(group, at(send, own), out);
      std::vector<float> all;
      for (size_t m = 0; m < n; ++m) {
        all.push_back(float(out.counts[m]));
        const std::vector<float> values = memory.read(out.members[m], out.counts[m]);
        all.insert(all.end(), values.begin(), values.end());
      }
      comm.barrier(group);  // the members' sends stay until every member has read them
      return all;
    }
    case Op::ReduceScatter: {
      auto send = memory.make(input(rank, n * count, 6));
      auto recv = memory.make(std::vector<float>(count, -7.0f));
      comm.reduce_scatter(group, at(send, n * count), at(recv, count));
      return memory.read(recv.get(), count);
    }
    case Op::AllToAll: {
      auto send = memory.make(input(rank, n * count, 7));
      auto recv = memory.make(std::vector<float>(n * count, -7.0f));
      comm.all_to_all(group, at(send, n * count), at(recv, n * count));
      return memory.read(recv.get(), n * count);
    }
    case Op::Broadcast: {
      auto data = memory.make(input(rank, count, 8));
      comm.broadcast(group, at(data, count), group.size() - 1);
      return memory.read(data.get(), count);
    }
    case Op::Barrier:
      comm.barrier(group);
      return {};
  }
  return {};
}

struct MeshCase {
  std::vector<std::string> names;
  std::vector<int> sizes;
};

std::vector<MeshCase> meshes() {
  return {{{"x"}, {1}}, {{"x"}, {2}}, {{"x"}, {3}}, {{"x"}, {5}}, {{"x"}, {8}}, {{"x", "y"}, {2, 2}},
          {{"x", "y"}, {3, 2}}, {{"x", "y"}, {4, 2}}, {{"x", "y", "z"}, {2, 2, 2}}};
}

// The groups of every subset of a mesh's dims.
std::vector<std::vector<std::string>> dim_subsets(const Mesh& mesh) {
  std::vector<std::vector<std::string>> subsets;
  for (int mask = 1; mask < (1 << mesh.num_dims()); ++mask) {
    std::vector<std::string> dims;
    for (int d = 0; d < mesh.num_dims(); ++d)
      if (mask & (1 << d)) dims.push_back(mesh.dim_names()[size_t(d)]);
    subsets.push_back(dims);
  }
  return subsets;
}

const std::vector<size_t> kCounts = {0, 1, 7, 1000, 5003};

// Every rank of `mesh` runs every op on its group along `dims` for every count, with comms[rank]; `setup` runs
// first in each rank's fiber. Returns rank -> the results in order; failures are collected as text.
// comms[i] is world rank first + i's (first = 0 and every rank of the mesh, unless the mesh spans processes).
std::vector<std::vector<float>> run_all(const MeshPtr& mesh, const std::vector<std::string>& dims,
                                        std::vector<std::unique_ptr<Communicator>>& comms,
                                        const std::function<Memory(int rank)>& setup, std::vector<std::string>& failures,
                                        int first = 0) {
  const int n = int(comms.size());
  std::vector<std::vector<float>> results(static_cast<size_t>(n));
  std::mutex mutex;
  fibers::run(n, std::min(n, 3), [&](int index) {
    const int rank = first + index;
    try {
      const Memory memory = setup(rank);
      Group group;
      group.ranks = mesh->group(rank, dims);
      group.index = int(std::find(group.ranks.begin(), group.ranks.end(), rank) - group.ranks.begin());
      for (size_t count : kCounts)
        for (Op op : kOps) {
          std::vector<float> out;
          try {
            out = run_op(op, *comms[size_t(index)], group, count, memory);
          } catch (const std::exception& error) {
            throw Error(fmt::format("{} of {}: {}", op_name(op), count, error.what()));
          }
          results[size_t(index)].push_back(float(out.size()));
          results[size_t(index)].insert(results[size_t(index)].end(), out.begin(), out.end());
        }
    } catch (const std::exception& error) {
      std::lock_guard lock(mutex);
      failures.push_back(fmt::format("rank {}: {}", rank, error.what()));
    }
  });
  return results;
}

// What run_all must record for every world rank of `mesh` on its group along `dims`: plain loops over the
// inputs, no communicator. Sums and maxima run in member order (the communicators' documented order), a
// maximum by std::max's rule (the first unless it is less).
std::vector<std::vector<float>> reference_all(const MeshPtr& mesh, const std::vector<std::string>& dims) {
  std::vector<std::vector<float>> results(size_t(mesh->size()));
  for (int rank = 0; rank < mesh->size(); ++rank) {
    const std::vector<int> ranks = mesh->group(rank, dims);
    const size_t n = ranks.size();
    const size_t index = size_t(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
    std::vector<float>& out = results[size_t(rank)];
    auto record = [&](const std::vector<float>& values) {
      out.push_back(float(values.size()));
      out.insert(out.end(), values.begin(), values.end());
    };
    // Element `at` of every member's input (`length` floats, `salt`), combined in member order.
    auto combine = [&](size_t length, uint32_t salt, size_t at, size_t count, bool max) {
      std::vector<float> combined(count);
      for (size_t m = 0; m < n; ++m) {
        const std::vector<float> theirs = input(ranks[m], length, salt);
        for (size_t i = 0; i < count; ++i) {
          const float x = theirs[at + i];
          combined[i] = m == 0 ? x : max ? (combined[i] < x ? x : combined[i]) : combined[i] + x;
        }
      }
      return combined;
    };
    auto concatenated = [&](size_t count, uint32_t salt) {
      std::vector<float> all;
      for (int member : ranks) {
        const std::vector<float> theirs = input(member, count, salt);
        all.insert(all.end(), theirs.begin(), theirs.end());
      }
      return all;
    };
    for (size_t count : kCounts)
      for (Op op : kOps) switch (op) {
          case Op::SumAll: record(combine(count, 1, 0, count, false)); break;
          case Op::MaxAll: record(combine(count, 1, 0, count, true)); break;
          case Op::Gather: record(concatenated(count, 2)); break;
          case Op::Shared: record(concatenated(count, 3)); break;
          case Op::InPlace: record(concatenated(count, 4)); break;
          case Op::Varying: {
            std::vector<float> all;
            for (size_t m = 0; m < n; ++m) {
              const size_t own = count + m * 3;
              all.push_back(float(own));
              const std::vector<float> theirs = input(ranks[m], own, 5);
              all.insert(all.end(), theirs.begin(), theirs.end());
            }
            record(all);
            break;
          }
          case Op::ReduceScatter: record(combine(n * count, 6, index * count, count, false)); break;
          case Op::AllToAll: {
            std::vector<float> all;
            for (int member : ranks) {
              const std::vector<float> theirs = input(member, n * count, 7);
              all.insert(all.end(), theirs.begin() + std::ptrdiff_t(index * count),
                         theirs.begin() + std::ptrdiff_t((index + 1) * count));
            }
            record(all);
            break;
          }
          case Op::Broadcast: record(input(ranks.back(), count, 8)); break;
          case Op::Barrier: record({}); break;
        }
  }
  return results;
}

// The same bits, except that any NaN equals any NaN: a sum with a NaN is a NaN whose payload is the hardware's
// (x86 keeps the operand's, 0x7fc00000; a GPU's arithmetic gives its canonical 0x7fffffff), not the op's.
bool same_value_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(float)) == 0;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_value_bits(a[i], b[i])) return false;
  return true;
}

// The first op and element where two ranks' result streams differ, for the message.
std::string first_difference(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (!same_value_bits(got[i], want[i]))
      return fmt::format("element {} of the stream: {} vs {} (bits {:08x} vs {:08x})", i, got[i], want[i],
                         std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]));
  return fmt::format("lengths {} vs {}", got.size(), want.size());
}

// Every op on every group of every test mesh: the device world made by `world_for` (rank -> its device given
// by `device_of`) against LocalWorld, bit for bit.
void check_against_host(const std::function<DeviceLocalWorld(const std::vector<int>& devices)>& world_for,
                        const std::function<int(int rank, int size)>& device_of, bool gpu) {
  for (const MeshCase& mesh_case : meshes()) {
    const MeshPtr mesh = make_mesh(mesh_case.names, mesh_case.sizes);
    const int n = mesh->size();
    std::vector<int> devices(static_cast<size_t>(n));
    for (int rank = 0; rank < n; ++rank) devices[size_t(rank)] = device_of(rank, n);
    for (const auto& dims : dim_subsets(*mesh)) {
      CAPTURE(mesh->to_string());
      CAPTURE(fmt::format("[{}] on devices [{}]", fmt::join(dims, ","), fmt::join(devices, ",")));
      std::vector<std::string> failures;
      const auto want = reference_all(mesh, dims);
      LocalWorld host(n);
      std::vector<std::unique_ptr<Communicator>> host_comms;
      for (int rank = 0; rank < n; ++rank) host_comms.push_back(host.communicator(rank));
      const auto on_host = run_all(mesh, dims, host_comms, [](int) { return Memory{}; }, failures);

      DeviceLocalWorld world = world_for(devices);
      std::vector<std::unique_ptr<Communicator>> comms;
      for (int rank = 0; rank < n; ++rank) comms.push_back(world.communicator(rank));
      const auto got = run_all(mesh, dims, comms, [&](int rank) {
        if (gpu) kernels::use_rank_stream(devices[size_t(rank)], rank);  // each rank its own stream
        return Memory{gpu, devices[size_t(rank)]};
      }, failures);
      for (const std::string& failure : failures) FAIL_CHECK(failure);
      for (int rank = 0; rank < n && failures.empty(); ++rank) {
        CAPTURE(rank);
        if (!same_bits(on_host[size_t(rank)], want[size_t(rank)]))
          FAIL_CHECK("LocalWorld: " << first_difference(on_host[size_t(rank)], want[size_t(rank)]));
        if (!same_bits(got[size_t(rank)], want[size_t(rank)]))
          FAIL_CHECK(first_difference(got[size_t(rank)], want[size_t(rank)]));
      }
    }
  }
}

DeviceLocalWorld simulated(const std::vector<int>& devices) { return DeviceLocalWorld::simulated(devices); }

DeviceLocalWorld on_gpus(const std::vector<int>& devices) {
  std::vector<Place> places;
  for (int device : devices) places.push_back(Place::cuda(device));
  return DeviceLocalWorld(places);
}

bool no_gpu(int needed = 1) {
  const int count = kernels::cuda_device_count();
  if (count >= needed) return false;
  const std::string why = needed == 1 ? "skipped: no GPU" : fmt::format("skipped: {} GPU(s), {} needed", count, needed);
  MESSAGE(why);
  return true;
}

}  // namespace

TEST_CASE("collective kernels: a reduce keeps member order over more members than one launch takes") {
  const auto& k = kernels::cpu_kernels<kernels::CollectiveKernels>();
  for (int n : {1, 2, 64, 65, 130}) {
    for (int t : {1, 3, 64, 70}) {
      CAPTURE(n);
      CAPTURE(t);
      const size_t count = 37;
      std::vector<std::vector<float>> values(static_cast<size_t>(n));
      std::vector<const float*> sources;
      for (int m = 0; m < n; ++m) {
        values[size_t(m)] = input(m, count, 11);
        sources.push_back(values[size_t(m)].data());
      }
      for (bool max : {false, true}) {
        std::vector<std::vector<float>> outs(size_t(t), std::vector<float>(count, -1.0f));
        std::vector<float*> targets;
        for (auto& out : outs) targets.push_back(out.data());
        k.reduce(sources.data(), n, targets.data(), t, count, max, nullptr);
        std::vector<float> want(count);
        for (size_t i = 0; i < count; ++i) {
          float s = values[0][i];
          for (int m = 1; m < n; ++m) s = max ? std::max(s, values[size_t(m)][i]) : s + values[size_t(m)][i];
          want[i] = s;
        }
        for (const auto& out : outs) CHECK(same_bits(out, want));
      }
    }
  }
  // The passes: one when it fits; else source slices into scratch, then target slices from it.
  CHECK(kernels::reduce_passes(64, 64).size() == 1);
  const auto passes = kernels::reduce_passes(130, 70);
  REQUIRE(passes.size() == 5);
  CHECK((passes[0].first_source == 0 && passes[0].sources == 64 && !passes[0].seeded && passes[0].into_scratch));
  CHECK((passes[2].first_source == 128 && passes[2].sources == 2 && passes[2].seeded && passes[2].into_scratch));
  CHECK((passes[3].sources == 0 && passes[3].seeded && passes[3].first_target == 0 && passes[3].targets == 64));
  CHECK((passes[4].first_target == 64 && passes[4].targets == 6));
}

TEST_CASE("collective kernels: gather puts member m's chunk at m * chunk of every target") {
  const auto& k = kernels::cpu_kernels<kernels::CollectiveKernels>();
  const std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
  const float* sources[] = {a.data(), b.data()};
  std::vector<float> x(6), y(6);
  float* targets[] = {x.data(), y.data()};
  k.gather(sources, 2, 3, targets, 2, nullptr);
  CHECK(x == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(y == x);
}

TEST_CASE("device-local communicator (simulated on the host): every collective equals plain loops bit for bit") {
  SUBCASE("every rank on one device") {
    check_against_host(simulated, [](int, int) { return 0; }, false);
  }
  SUBCASE("ranks on two devices, alternating") {
    check_against_host(simulated, [](int rank, int) { return rank % 2; }, false);
  }
  SUBCASE("ranks on three devices, in blocks") {
    check_against_host(simulated, [](int rank, int size) { return rank * 3 / size; }, false);
  }
  SUBCASE("every rank on its own device") {
    check_against_host(simulated, [](int rank, int) { return rank; }, false);
  }
}

TEST_CASE("device-local communicator (simulated): a group larger than one launch's pointer table") {
  const int n = 70;
  const size_t count = 513;
  for (bool split : {false, true}) {
    CAPTURE(split);
    LocalWorld host(n);
    std::vector<int> devices(size_t(n), 0);
    if (split) devices[5] = devices[40] = 1;  // a few members elsewhere: staged copies and copies back
    DeviceLocalWorld world = DeviceLocalWorld::simulated(devices);
    std::vector<std::vector<float>> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    std::vector<std::string> failures;
    std::mutex mutex;
    for (int pass = 0; pass < 2; ++pass) {
      fibers::run(n, 2, [&](int rank) {
        try {
          auto comm = pass == 0 ? host.communicator(rank) : world.communicator(rank);
          Group group;
          for (int r = 0; r < n; ++r) group.ranks.push_back(r);
          group.index = rank;
          std::vector<float> data = input(rank, count, 9);
          comm->all_reduce(group, BufferView{data.data(), count, comm->place()}, ReduceOp::Sum);
          std::vector<float> gathered(size_t(n) * 3);
          comm->all_gather(group, ConstBufferView{data.data(), 3, comm->place()},
                           BufferView{gathered.data(), gathered.size(), comm->place()});
          data.insert(data.end(), gathered.begin(), gathered.end());
          (pass == 0 ? want : got)[size_t(rank)] = data;
        } catch (const std::exception& error) {
          std::lock_guard lock(mutex);
          failures.push_back(error.what());
        }
      });
    }
    for (const auto& failure : failures) FAIL_CHECK(failure);
    for (int rank = 0; rank < n; ++rank) CHECK(same_bits(got[size_t(rank)], want[size_t(rank)]));
  }
}

TEST_CASE("device-local communicator (simulated): a mismatch is an error on every member, and the group goes on") {
  DeviceLocalWorld world = DeviceLocalWorld::simulated({0, 0, 1});
  std::vector<std::string> errors(3);
  std::vector<float> after(3);
  fibers::run(3, 2, [&](int rank) {
    auto comm = world.communicator(rank);
    Group group{{0, 1, 2}, rank};
    std::vector<float> data(8, float(rank));
    try {
      comm->all_reduce(group, BufferView{data.data(), size_t(rank == 2 ? 4 : 8), comm->place()}, ReduceOp::Sum);
    } catch (const Error& error) {
      errors[size_t(rank)] = error.what();
    }
    try {
      float one = 1.0f;
      comm->all_reduce(group, BufferView{&one, 1, comm->place()}, ReduceOp::Sum);
      after[size_t(rank)] = one;
    } catch (const Error& error) {
      errors[size_t(rank)] += std::string(" then ") + error.what();
    }
  });
  for (int rank = 0; rank < 3; ++rank) {
    CAPTURE(rank);
    CHECK(errors[size_t(rank)].find("collective mismatch on group [0,1,2]") != std::string::npos);
    CHECK(errors[size_t(rank)].find("all_reduce(count=4, op=sum)") != std::string::npos);
    CHECK(errors[size_t(rank)].find(" then ") == std::string::npos);
    CHECK(after[size_t(rank)] == 3.0f);
  }
}

TEST_CASE("device-local communicator (simulated): abort wakes a member waiting for a peer that never comes") {
  DeviceLocalWorld world = DeviceLocalWorld::simulated({0, 1});
  std::string error;
  fibers::run(2, 2, [&](int rank) {
    auto comm = world.communicator(rank);
    if (rank == 1) {
      world.abort("rank 1 failed: boom");
      return;
    }
    try {
      comm->barrier(Group{{0, 1}, 0});
    } catch (const Error& caught) {
      error = caught.what();
    }
  });
  CHECK(error == "[comm] aborted: rank 1 failed: boom");
}

TEST_CASE("device-local communicator: refuses a host place, and a build without CUDA says so at the first collective") {
  CHECK_THROWS_WITH_AS(DeviceLocalWorld({Place::cpu()}), "[comm] a device-local world holds CUDA places, not cpu",
                       Error);
  if (kernels::cuda_device_count() > 0) return;
  DeviceLocalWorld world({Place::cuda(0)});
  auto comm = world.communicator(0);
  CHECK_THROWS_AS(comm->barrier(Group{{0}, 0}), Error);
}

TEST_CASE("needs a GPU: every collective on 1..8 ranks sharing one GPU equals plain loops bit for bit") {
  if (no_gpu()) return;
  check_against_host(on_gpus, [](int, int) { return 0; }, true);
}

TEST_CASE("needs 2 GPUs: every collective on ranks spread over two GPUs equals plain loops bit for bit") {
  if (no_gpu(2)) return;
  check_against_host(on_gpus, [](int rank, int) { return rank % 2; }, true);
  check_against_host(on_gpus, [](int rank, int size) { return rank * 2 / size; }, true);
}

TEST_CASE("span layout: the processes of a group, their members and leaders") {
  // A 2x3 mesh over 3 processes holds ranks {0,1}, {2,3}, {4,5}: a row spans two processes unevenly.
  const MeshPtr mesh = make_mesh({"x", "y"}, {2, 3});
  const Placement second = placement_of(6, 3, 1);
  const SpanLayout row = span_layout({0, 1, 2}, second);
  CHECK(row.processes == std::vector<int>{0, 1});
  CHECK(row.first == std::vector<int>{0, 2});
  CHECK(row.count == std::vector<int>{2, 1});
  CHECK(row.mine == 1);
  CHECK(row.leader() == 2);  // member 2 (rank 2) leads process 1's part
  CHECK(row.spans());
  CHECK_FALSE(row.even());
  CHECK(row.process_of_member(1) == 0);
  CHECK(row.process_of_member(2) == 1);
  const SpanLayout other = span_layout({3, 4, 5}, placement_of(6, 3, 0));
  CHECK(other.mine == -1);
  CHECK(other.leader() == -1);
  const SpanLayout column = span_layout({1, 4}, placement_of(6, 3, 2));
  CHECK(column.processes == std::vector<int>{0, 2});
  CHECK((column.even() && column.mine == 1 && column.leader() == 1));
  const SpanLayout inside = span_layout({0, 1}, placement_of(4, 2, 0));
  CHECK_FALSE(inside.spans());
  CHECK_THROWS_AS(span_layout({2, 1}, second), Error);
  // Every group of every dim subset once, in one order: along x, along y, then the whole mesh.
  const auto groups = mesh_groups(*mesh);
  REQUIRE(groups.size() == 3 + 2 + 1);
  CHECK(groups[0] == std::vector<int>{0, 3});
  CHECK(groups[3] == std::vector<int>{0, 1, 2});
  CHECK(groups[5] == std::vector<int>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("GpuWorld: a mesh in one process is a device-local world; it checks its places") {
  const MeshPtr mesh = make_mesh({"x"}, {2});
  CHECK_THROWS_WITH_AS(GpuWorld(mesh, placement_of(2, 1, 0), {Place::cuda(0)}),
                       "[comm] 1 GPU places for the 2 ranks of process 0", Error);
  GpuWorld world(mesh, placement_of(2, 1, 0), {Place::cuda(0), Place::cuda(0)});
  CHECK(world.communicator(1)->backend() == "device-local");
  CHECK(world.communicator(1)->rank() == 1);
  world.abort("stop");
  CHECK(world.aborted().load());
}

// Run by tests/e2e/gpu_collectives_mpi.sh under `mpirun -np 2` on a machine with 2 GPUs: each process's ranks on
// its own GPU, every collective on every group of a 2x2 and a 4x2 mesh (groups inside one process and across both)
// equal to plain loops over the inputs (integer inputs: NCCL sums in its own order).
TEST_CASE("needs 2 GPUs and MPI: every collective across processes (NCCL) equals plain loops") {
  initialize_processes();
  if (process_count() < 2) {
    MESSAGE("skipped: not under mpirun -np 2 or more");
    return;
  }
  if (no_gpu(process_count())) return;
  integer_inputs = true;
  for (const MeshCase& mesh_case : std::vector<MeshCase>{{{"x", "y"}, {2, 2}}, {{"x", "y"}, {4, 2}}}) {
    const MeshPtr mesh = make_mesh(mesh_case.names, mesh_case.sizes);
    const Placement placement = placement_of(mesh->size());
    std::vector<Place> places(size_t(placement.local), Place::cuda(placement.process % kernels::cuda_device_count()));
    GpuWorld world(mesh, placement, places);
    for (const auto& dims : dim_subsets(*mesh)) {
      CAPTURE(mesh->to_string());
      CAPTURE(fmt::format("[{}]", fmt::join(dims, ",")));
      std::vector<std::string> failures;
      const auto want = reference_all(mesh, dims);
      std::vector<std::unique_ptr<Communicator>> comms;
      for (int i = 0; i < placement.local; ++i) comms.push_back(world.communicator(i));
      const auto got = run_all(mesh, dims, comms, [&](int rank) {
        kernels::use_rank_stream(places[size_t(rank - placement.first)].device, rank);
        return Memory{true, places[size_t(rank - placement.first)].device};
      }, failures, placement.first);
      for (const std::string& failure : failures) FAIL_CHECK(failure);
      for (int i = 0; i < placement.local && failures.empty(); ++i) {
        CAPTURE(placement.first + i);
        if (!same_bits(got[size_t(i)], want[size_t(placement.first + i)]))
          FAIL_CHECK(first_difference(got[size_t(i)], want[size_t(placement.first + i)]));
      }
    }
  }
  integer_inputs = false;
}

// The in-process collectives, run_spmd and the current device: every collective with rank-dependent data on
// groups along each mesh dim and several dims, for meshes of 1 to 8 devices; mismatches, abort, odd counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/local/local.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/mesh.hpp"

using namespace dtrain;

long operator_new_calls();  // tests/test_buffer_pool.cpp counts them

namespace {

struct MeshCase {
  std::vector<std::string> names;
  std::vector<int> sizes;
};

std::vector<MeshCase> meshes() {
  return {{{"x"}, {1}},           {{"x"}, {2}},          {{"x"}, {4}}, {{"x"}, {8}},
          {{"x", "y"}, {2, 2}}, {{"x", "y"}, {4, 2}}, {{"x", "y", "z"}, {2, 2, 2}}};
}

// Every non-empty subset of the mesh's dims, in mesh order: along each dim and along several.
std::vector<std::vector<std::string>> dim_subsets(const Mesh& mesh) {
  std::vector<std::vector<std::string>> subsets;
  int n = mesh.num_dims();
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<std::string> dims;
    for (int d = 0; d < n; ++d)
      if (mask & (1 << d)) dims.push_back(mesh.dim_names()[d]);
    subsets.push_back(dims);
  }
  return subsets;
}

// The value member `member` contributes at element i (exact in float32: small integers).
float value(int member, size_t i) { return float(member * 1000 + int(i % 997)); }

// Runs fn on every rank of every test mesh, for every group of dims and every count; collects failures as
// strings (doctest's CHECK is not thread-safe) and reports them on the calling thread.
// Counts: empty, odd, around the staged/shared switch (4096 floats per member), and several work items
// (8192 floats each) per member for the 8-device meshes' largest groups.
const std::vector<size_t> kCounts = {0, 1, 7, 33, 1000, 4099};
const std::vector<size_t> kLargeCounts = {20011};

template <typename Fn>
void for_every_group(Fn fn, const std::vector<size_t>& counts = kCounts,
                     const std::vector<MeshCase>& mesh_cases = meshes()) {
  for (const auto& mesh_case : mesh_cases) {
    auto mesh = make_mesh(mesh_case.names, mesh_case.sizes);
    for (const auto& dims : dim_subsets(*mesh)) {
      std::mutex mutex;
      std::vector<std::string> failures;
      run_spmd(mesh, [&](DeviceContext& device) {
        Group group = device.group(dims);
        for (size_t count : counts) {
          std::string failure = fn(device, group, count);
          if (!failure.empty()) {
            std::lock_guard lock(mutex);
            failures.push_back(fmt::format("mesh {} dims [{}] rank {} count {}: {}", mesh->to_string(),
                                           fmt::join(dims, ","), device.rank, count, failure));
          }
        }
      });
      INFO(mesh->to_string(), " dims ", fmt::format("{}", fmt::join(dims, ",")));
      CHECK(failures.empty());
      for (size_t i = 0; i < std::min<size_t>(failures.size(), 5); ++i) MESSAGE(failures[i]);
    }
  }
}

std::string first_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return fmt::format("size {} != {}", got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return fmt::format("element {} is {}, expected {}", i, got[i], want[i]);
  return "";
}

std::string check_all_reduce(DeviceContext& device, const Group& group, size_t count) {
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = value(group.index, i);
  device.comm->all_reduce(group, host_view(data), ReduceOp::Sum);
  int n = group.size();
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) want[i] = float(1000 * n * (n - 1) / 2 + n * int(i % 997));
  std::string sum_failure = first_difference(data, want);

  // Max: the largest contribution comes from a different member at different elements.
  for (size_t i = 0; i < count; ++i) data[i] = float((int(i) + group.index) % n) - 0.5f * group.index;
  device.comm->all_reduce(group, host_view(data), ReduceOp::Max);
  for (size_t i = 0; i < count; ++i) {
    float best = -1e9f;
    for (int m = 0; m < n; ++m) best = std::max(best, float((int(i) + m) % n) - 0.5f * m);
    want[i] = best;
  }
  std::string max_failure = first_difference(data, want);
  if (!sum_failure.empty()) return "sum: " + sum_failure;  // only now: every member makes the same calls
  return max_failure.empty() ? "" : "max: " + max_failure;
}

std::string check_all_gather(DeviceContext& device, const Group& group, size_t count) {
  std::vector<float> send(count);
  for (size_t i = 0; i < count; ++i) send[i] = value(group.index, i);
  std::vector<float> recv(count * group.size(), -1.0f);
  device.comm->all_gather(group, host_view(send), host_view(recv));
  std::vector<float> want;
  for (int m = 0; m < group.size(); ++m)
    for (size_t i = 0; i < count; ++i) want.push_back(value(m, i));
  return first_difference(recv, want);
}

// The shared variant: the same values, and in-process members of a group receive one and the same buffer.
std::string check_all_gather_shared(DeviceContext& device, const Group& group, size_t count) {
  std::vector<float> send(count);
  for (size_t i = 0; i < count; ++i) send[i] = value(group.index, i);
  std::shared_ptr<const float[]> shared = device.comm->all_gather_shared(group, host_view(send));
  std::vector<float> recv(shared.get(), shared.get() + count * group.size());
  std::vector<float> want;
  for (int m = 0; m < group.size(); ++m)
    for (size_t i = 0; i < count; ++i) want.push_back(value(m, i));
  std::string failure = first_difference(recv, want);
  // Every member reports its buffer's address; all must agree.
  std::vector<float> address(1), addresses(group.size());
  const uintptr_t mine = reinterpret_cast<uintptr_t>(shared.get());
  address[0] = float(mine % 16777213);  // exact in float32
  device.comm->all_gather(group, host_view(address), host_view(addresses));
  for (float other : addresses)
    if (other != address[0] && failure.empty()) failure = "members received different buffers";
  return failure;
}

// The in-place variant: each member writes its own chunk; all receive the whole, in one buffer.
std::string check_all_gather_shared_in_place(DeviceContext& device, const Group& group, size_t count) {
  std::shared_ptr<const float[]> shared = device.comm->all_gather_shared_in_place(group, count, [&](BufferView chunk) {
    for (size_t i = 0; i < count; ++i) chunk.data[i] = value(group.index, i);
  });
  std::vector<float> recv(shared.get(), shared.get() + count * group.size());
  std::vector<float> want;
  for (int m = 0; m < group.size(); ++m)
    for (size_t i = 0; i < count; ++i) want.push_back(value(m, i));
  std::string failure = first_difference(recv, want);
  std::vector<float> address{float(reinterpret_cast<uintptr_t>(shared.get()) % 16777213)}, addresses(group.size());
  device.comm->all_gather(group, host_view(address), host_view(addresses));
  for (float other : addresses)
    if (other != address[0] && failure.empty()) failure = "members received different buffers";
  return failure;
}

std::string check_reduce_scatter(DeviceContext& device, const Group& group, size_t count) {
  int n = group.size();
  // Member m's chunk c, element i: m + 1 + 100 * c + i % 13.
  std::vector<float> send(count * n);
  for (int c = 0; c < n; ++c)
    for (size_t i = 0; i < count; ++i) send[c * count + i] = float(group.index + 1 + 100 * c + int(i % 13));
  std::vector<float> recv(count, -1.0f);
  device.comm->reduce_scatter(group, host_view(send), host_view(recv));
  std::vector<float> want(count);
  int c = group.index;
  for (size_t i = 0; i < count; ++i) want[i] = float(n * (n + 1) / 2 + n * (100 * c + int(i % 13)));
  return first_difference(recv, want);
}

std::string check_all_to_all(DeviceContext& device, const Group& group, size_t count) {
  int n = group.size();
  // Member m's chunk j, element i encodes (from m, to j, i).
  auto code = [](int from, int to, size_t i) { return float(from * 100000 + to * 1000 + int(i % 997)); };
  std::vector<float> send(count * n);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i) send[j * count + i] = code(group.index, j, i);
  std::vector<float> recv(count * n, -1.0f);
  device.comm->all_to_all(group, host_view(send), host_view(recv));
  std::vector<float> want(count * n);
  for (int from = 0; from < n; ++from)
    for (size_t i = 0; i < count; ++i) want[from * count + i] = code(from, group.index, i);
  return first_difference(recv, want);
}

std::string check_broadcast(DeviceContext& device, const Group& group, size_t count) {
  std::string failures;  // collected, not returned at once: every member must make every call
  for (int root = 0; root < group.size(); ++root) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = value(group.index, i);
    device.comm->broadcast(group, host_view(data), root);
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = value(root, i);
    std::string failure = first_difference(data, want);
    if (!failure.empty() && failures.empty()) failures = fmt::format("root {}: {}", root, failure);
  }
  return failures;
}

}  // namespace

TEST_CASE("Mesh::group orders members by coordinate along the dims") {
  Mesh mesh({"a", "b", "c"}, {2, 3, 2});
  // rank = a*6 + b*2 + c
  CHECK(mesh.group(0, {"b"}) == std::vector<int>{0, 2, 4});
  CHECK(mesh.group(7, {"b"}) == std::vector<int>{7, 9, 11});
  CHECK(mesh.group(9, {"a"}) == std::vector<int>{3, 9});
  CHECK(mesh.group(9, {"c"}) == std::vector<int>{8, 9});
  CHECK(mesh.group(5, {"a", "c"}) == std::vector<int>{4, 5, 10, 11});
  CHECK(mesh.group(2, {"a", "b", "c"}).size() == 12);
  for (int rank = 0; rank < mesh.size(); ++rank) {
    for (const auto& dim : mesh.dim_names()) {
      auto members = mesh.group(rank, {dim});
      for (size_t i = 0; i < members.size(); ++i) CHECK(mesh.coord(members[i], dim) == int(i));
    }
  }
  auto shared = make_mesh({"a", "b", "c"}, {2, 3, 2});
  DeviceContext device{shared, 9, nullptr};
  Group group = device.group({"b"});
  CHECK(group.ranks == std::vector<int>{7, 9, 11});
  CHECK(group.index == 1);
}

TEST_CASE("all_reduce sums and maxes over every group") { for_every_group(check_all_reduce); }

TEST_CASE("all_gather concatenates in member order") { for_every_group(check_all_gather); }

TEST_CASE("all_gather_shared concatenates in member order into one buffer for all") {
  for_every_group(check_all_gather_shared);
  for_every_group(check_all_gather_shared, kLargeCounts);
}

TEST_CASE("all_gather_shared_in_place: members write their chunks into one buffer for all") {
  for_every_group(check_all_gather_shared_in_place);
  for_every_group(check_all_gather_shared_in_place, kLargeCounts);
}

namespace {

// Member m sends count + 3 * m floats (count 0: member 0 sends none). The result is the caller's: every
// member's floats lie in its own storage, and this member's send changes right after the call.
std::string check_all_gather_varying(DeviceContext& device, const Group& group, size_t count) {
  auto length = [&](int member) { return count + 3 * size_t(member); };
  std::vector<float> send(length(group.index));
  for (size_t i = 0; i < send.size(); ++i) send[i] = value(group.index, i);
  VaryingGather got;
  device.comm->all_gather_varying(group, host_view(send), got);
  std::fill(send.begin(), send.end(), -1.0f);
  if (got.counts.size() != size_t(group.size()) || got.members.size() != size_t(group.size()))
    return fmt::format("{} counts and {} members", got.counts.size(), got.members.size());
  for (int m = 0; m < group.size(); ++m) {
    if (got.counts[m] != length(m)) return fmt::format("member {} count {}, not {}", m, got.counts[m], length(m));
    size_t before = 0;  // where member m's floats must start in the storage
    for (int other = 0; other < m; ++other) before += got.counts[size_t(other)];
    if (got.members[m] != got.storage.get() + before) return fmt::format("member {} is not in the storage", m);
    for (size_t i = 0; i < length(m); ++i)
      if (got.members[m][i] != value(m, i)) return fmt::format("member {} element {} wrong", m, i);
  }
  return "";
}

// A backend with only the collectives every backend must have.
class BareCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "bare"; }
  Place place() const override { return Place::cpu(); }
  void barrier(const Group&) override {}

 protected:
  void do_all_reduce(const Group&, float*, size_t, ReduceOp) override {}
  void do_all_gather(const Group&, const float*, float*, size_t) override {}
  void do_reduce_scatter(const Group&, const float*, float*, size_t) override {}
  void do_all_to_all(const Group&, const float*, float*, size_t) override {}
  void do_broadcast(const Group&, float*, size_t, int) override {}
};

}  // namespace

TEST_CASE("all_gather_varying gathers members' different counts into storage of the caller's") {
  for_every_group(check_all_gather_varying);
}

TEST_CASE("a backend without a collective says so instead of emulating it") {
  BareCommunicator bare;
  const Group alone{{0}, 0};
  float value = 1.0f;
  VaryingGather out;
  float other = 0.0f;
  CHECK_THROWS_WITH_AS(bare.all_gather_varying(alone, host_view(&value, 1), out),
                       "[comm] backend bare has no all_gather_varying", Error);
  CHECK_THROWS_WITH_AS(bare.all_gather_shared(alone, host_view(&value, 1)), "[comm] backend bare has no all_gather_shared",
                       Error);
  CHECK_THROWS_WITH_AS(bare.all_gather_shared_in_place(alone, 1, [](BufferView) {}),
                       "[comm] backend bare has no all_gather_shared_in_place", Error);
  CHECK_THROWS_WITH_AS(bare.neighbour_exchange(alone, host_view(&value, 1), host_view(&other, 1)),
                       "[comm] backend bare has no neighbour_exchange", Error);
}

TEST_CASE("reduce_scatter gives each member the sum of its chunk") { for_every_group(check_reduce_scatter); }

TEST_CASE("all_to_all sends chunk j to member j") { for_every_group(check_all_to_all); }

TEST_CASE("broadcast copies the root's buffer to every member") { for_every_group(check_broadcast); }

TEST_CASE("large payloads span several work items of the shared path") {
  const std::vector<MeshCase> cases = {{{"x"}, {8}}, {{"x", "y"}, {4, 2}}};
  for_every_group(check_all_reduce, kLargeCounts, cases);
  for_every_group(check_all_gather, kLargeCounts, cases);
  for_every_group(check_reduce_scatter, kLargeCounts, cases);
  for_every_group(check_all_to_all, kLargeCounts, cases);
  for_every_group(check_broadcast, kLargeCounts, cases);
}

TEST_CASE("collectives on interleaved groups keep their own order") {
  auto mesh = make_mesh({"x", "y", "z"}, {2, 2, 2});
  std::atomic<int> wrong{0};
  run_spmd(mesh, [&](DeviceContext& device) {
    Group along_x = device.group({"x"}), across_yz = device.group({"y", "z"}), world = device.group({"x", "y", "z"});
    for (int round = 0; round < 50; ++round) {
      float a = float(device.rank + round), b = float(device.rank * round);
      device.comm->all_reduce(along_x, host_view(&a, 1), ReduceOp::Sum);
      device.comm->all_reduce(across_yz, host_view(&b, 1), ReduceOp::Max);
      float sum_x = 0, max_yz = -1;
      for (int r : along_x.ranks) sum_x += float(r + round);
      for (int r : across_yz.ranks) max_yz = std::max(max_yz, float(r * round));
      if (a != sum_x || b != max_yz) wrong.fetch_add(1);
      if (round % 10 == 0) device.comm->barrier(world);
    }
  });
  CHECK(wrong.load() == 0);
}

TEST_CASE("collectives on every group of a mesh, interleaved, staged and shared, with ranks arriving late") {
  auto mesh = make_mesh({"x", "y", "z"}, {2, 2, 2});
  std::atomic<int> wrong{0};
  run_spmd(mesh, [&](DeviceContext& device) {
    std::vector<Group> groups;
    for (const auto& dims : dim_subsets(*mesh)) groups.push_back(device.group(dims));
    for (int round = 0; round < 30; ++round) {
      for (size_t g = 0; g < groups.size(); ++g) {
        const Group& group = groups[g];
        const size_t count = (round + g) % 2 ? 5000 : 700;  // shared path, staged path
        const float tag = float(round * 10 + int(g));
        if ((device.rank + round + int(g)) % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::vector<float> send(count, tag + float(group.index)), recv(count * group.size());
        device.comm->all_gather(group, host_view(send), host_view(recv));
        for (int m = 0; m < group.size(); ++m)
          if (recv[m * count] != tag + float(m) || recv[m * count + count - 1] != tag + float(m)) wrong.fetch_add(1);
        device.comm->all_reduce(group, host_view(send), ReduceOp::Max);
        if (send[0] != tag + float(group.size() - 1) || send[count - 1] != send[0]) wrong.fetch_add(1);
      }
    }
  });
  CHECK(wrong.load() == 0);
}

TEST_CASE("a fast member meets in the next call while a slow one still reads the last") {
  // Two ranks on two threads, staged all_gathers back to back: a member leaving call k posts call k+1
  // while its peer may still copy from call k's staged copies.
  LocalWorld world(2);
  const size_t count = 4096;  // the largest staged payload
  std::atomic<int> wrong{0};
  fibers::run(2, 2, [&](int rank) {
    auto comm = world.communicator(rank);
    Group group{{0, 1}, rank};
    std::vector<float> send(count), recv(2 * count);
    for (int round = 0; round < 3000; ++round) {
      for (size_t i = 0; i < count; ++i) send[i] = float(round * 2 + rank);
      comm->all_gather(group, host_view(send), host_view(recv));
      for (size_t i = 0; i < 2 * count; ++i)
        if (recv[i] != float(round * 2 + int(i / count))) {
          wrong.fetch_add(1);
          break;
        }
    }
  });
  CHECK(wrong.load() == 0);
}

TEST_CASE("after a mismatch the members go on with the group's next calls") {
  LocalWorld world(3);
  std::atomic<int> mismatches{0}, wrong{0};
  std::vector<std::string> last_errors(3);
  fibers::run(3, 2, [&](int rank) {
    auto comm = world.communicator(rank);
    Group group{{0, 1, 2}, rank};
    float data[16] = {};
    try {
      comm->all_reduce(group, host_view(data, rank == 1 ? 12 : 8), ReduceOp::Sum);
    } catch (const Error& error) {
      if (std::string(error.what()).find("mismatch") != std::string::npos) mismatches.fetch_add(1);
    }
    for (int round = 0; round < 20; ++round) {
      float x = float(rank + round);
      comm->all_reduce(group, host_view(&x, 1), ReduceOp::Sum);
      if (x != float(3 + 3 * round)) wrong.fetch_add(1);
    }
    try {
      comm->barrier(group);
      comm->all_reduce(group, host_view(data, rank == 2 ? 1 : 2), ReduceOp::Sum);
    } catch (const Error& error) {
      last_errors[rank] = error.what();
    }
  });
  CHECK(mismatches.load() == 3);
  CHECK(wrong.load() == 0);
  for (const auto& error : last_errors) CHECK(error.find("(call #22)") != std::string::npos);
}

TEST_CASE("collectives allocate nothing once warm") {
  auto mesh = make_mesh({"x"}, {8});
  std::atomic<long> allocations{-1};
  run_spmd(mesh, [&](DeviceContext& device) {
    const Group& group = device.group({"x"});
    std::vector<float> small(100, 1.0f), large(20000, 1.0f), gathered(8 * 20000);
    auto round = [&] {
      device.comm->all_reduce(group, host_view(small), ReduceOp::Sum);  // staged
      device.comm->all_reduce(group, host_view(large), ReduceOp::Max);  // shared
      device.comm->all_gather(group, host_view(small), host_view(gathered.data(), 8 * small.size()));
      device.comm->all_gather(group, host_view(large), host_view(gathered));
      device.comm->reduce_scatter(group, host_view(small.data(), small.size() / 8 * 8),
                                  host_view(gathered.data(), small.size() / 8));
      device.comm->all_to_all(group, host_view(large), host_view(gathered.data(), large.size()));
      device.comm->broadcast(group, host_view(small), 3);
      device.comm->broadcast(group, host_view(large), 5);
      device.comm->barrier(group);
    };
    for (int warm = 0; warm < 20; ++warm) round();
    long before = 0;
    if (device.rank == 0) before = operator_new_calls();
    device.comm->barrier(group);  // nobody starts before rank 0 counted
    for (int measured = 0; measured < 20; ++measured) round();
    device.comm->barrier(group);  // all are done when it counts again
    if (device.rank == 0) allocations = operator_new_calls() - before;
    device.comm->barrier(group);  // and none has left run_spmd before
  });
  CHECK(allocations.load() == 0);
}

TEST_CASE("barrier holds every member until all arrive") {
  auto mesh = make_mesh({"x"}, {8});
  std::atomic<int> arrived{0};
  std::atomic<int> early{0};
  run_spmd(mesh, [&](DeviceContext& device) {
    Group group = device.group({"x"});
    for (int round = 1; round <= 20; ++round) {
      if (device.rank == round % 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      arrived.fetch_add(1);
      device.comm->barrier(group);
      if (arrived.load() < 8 * round) early.fetch_add(1);
      device.comm->barrier(group);  // nobody starts the next round before all have checked
    }
  });
  CHECK(early.load() == 0);
}

TEST_CASE("large all_reduce crosses slice and block boundaries") {
  // 8 members, a count that is neither a multiple of 8 nor of the block size.
  auto mesh = make_mesh({"x"}, {8});
  const size_t count = 3 * 2048 * 8 + 12345;
  std::atomic<int> wrong{0};
  run_spmd(mesh, [&](DeviceContext& device) {
    Group group = device.group({"x"});
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = float(device.rank + 1) * float(i % 1024);
    device.comm->all_reduce(group, host_view(data), ReduceOp::Sum);
    for (size_t i = 0; i < count; ++i)
      if (data[i] != 36.0f * float(i % 1024)) wrong.fetch_add(1);
  });
  CHECK(wrong.load() == 0);
}

TEST_CASE("members that disagree on a collective get an error naming both") {
  auto mesh = make_mesh({"x"}, {2});
  SUBCASE("kind") {
    std::string message;
    try {
      run_spmd(mesh, [](DeviceContext& device) {
        Group group = device.group({"x"});
        std::vector<float> buffer(8, 1.0f), out(16);
        if (device.rank == 0) device.comm->all_reduce(group, host_view(buffer), ReduceOp::Sum);
        else device.comm->all_gather(group, host_view(buffer), host_view(out));
      });
    } catch (const Error& error) {
      message = error.what();
    }
    CHECK(message.find("all_reduce") != std::string::npos);
    CHECK(message.find("all_gather") != std::string::npos);
    CHECK(message.find("mismatch") != std::string::npos);
  }
  SUBCASE("count") {
    std::string message;
    try {
      run_spmd(mesh, [](DeviceContext& device) {
        Group group = device.group({"x"});
        std::vector<float> buffer(16, 1.0f);
        device.comm->all_reduce(group, host_view(buffer.data(), device.rank == 0 ? 8 : 12), ReduceOp::Sum);
      });
    } catch (const Error& error) {
      message = error.what();
    }
    CHECK(message.find("count=8") != std::string::npos);
    CHECK(message.find("count=12") != std::string::npos);
  }
  SUBCASE("reduce op and broadcast root") {
    CHECK_THROWS_WITH_AS(run_spmd(mesh,
                                  [](DeviceContext& device) {
                                    Group group = device.group({"x"});
                                    float x = 1;
                                    device.comm->all_reduce(group, host_view(&x, 1), device.rank ? ReduceOp::Max : ReduceOp::Sum);
                                  }),
                         doctest::Contains("op=max"), Error);
    CHECK_THROWS_WITH_AS(run_spmd(mesh,
                                  [](DeviceContext& device) {
                                    Group group = device.group({"x"});
                                    float x = 1;
                                    device.comm->broadcast(group, host_view(&x, 1), device.rank);
                                  }),
                         doctest::Contains("root=1"), Error);
  }
}

TEST_CASE("a failing rank aborts its peers and run_spmd rethrows the original error") {
  auto mesh = make_mesh({"x", "y"}, {4, 2});
  std::atomic<int> aborted{0};
  std::string message;
  try {
    run_spmd(mesh, [&](DeviceContext& device) {
      Group group = device.group({"x", "y"});
      std::vector<float> data(100, 1.0f);
      device.comm->all_reduce(group, host_view(data), ReduceOp::Sum);  // everybody gets through one
      if (device.rank == 5) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the peers block first
        throw Error("[test] rank 5 broke");
      }
      try {
        device.comm->all_reduce(group, host_view(data), ReduceOp::Sum);  // waits for rank 5 forever
      } catch (const Error& error) {
        if (std::string(error.what()).rfind("[comm] aborted: ", 0) == 0) aborted.fetch_add(1);
        throw;
      }
    });
  } catch (const Error& error) {
    message = error.what();
  }
  CHECK(message == "[test] rank 5 broke");
  CHECK(aborted.load() == 7);
}

TEST_CASE("abort reaches ranks that enter a collective later, and non-Error exceptions survive") {
  auto mesh = make_mesh({"x"}, {4});
  std::atomic<int> aborted{0};
  CHECK_THROWS_AS(run_spmd(mesh,
                           [&](DeviceContext& device) {
                             if (device.rank == 0) throw std::out_of_range("index 9");
                             std::this_thread::sleep_for(std::chrono::milliseconds(30));
                             float x = 1;
                             Group group = device.group({"x"});
                             try {
                               device.comm->barrier(group);
                               device.comm->all_reduce(group, host_view(&x, 1), ReduceOp::Sum);
                             } catch (const Error& error) {
                               if (std::string(error.what()).find("rank 0 failed: index 9") != std::string::npos)
                                 aborted.fetch_add(1);
                               throw;
                             }
                           }),
                  std::out_of_range);
  CHECK(aborted.load() == 3);

  LocalWorld world(2);
  auto comm = world.communicator(1);
  world.abort("shutting down");
  Group group{{0, 1}, 1};
  CHECK_THROWS_WITH_AS(comm->barrier(group), "[comm] aborted: shutting down", Error);
}

TEST_CASE("groups that do not contain the caller are rejected") {
  LocalWorld world(4);
  auto comm = world.communicator(2);
  float x = 0;
  CHECK_THROWS_AS(comm->all_reduce(Group{{0, 1}, 0}, host_view(&x, 1), ReduceOp::Sum), Error);
  CHECK_THROWS_AS(comm->all_reduce(Group{{2, 7}, 0}, host_view(&x, 1), ReduceOp::Sum), Error);
  CHECK(comm->rank() == 2);
  CHECK(comm->world_size() == 4);
  CHECK(comm->backend() == "local");
}

TEST_CASE("current_device exists only inside run_spmd") {
  CHECK_THROWS_WITH_AS(current_device(), doctest::Contains("no current device"), Error);
  auto mesh = make_mesh({"x"}, {4});
  std::atomic<int> right{0};
  run_spmd(mesh, [&](DeviceContext& device) {
    if (&current_device() == &device && current_device().rank == device.rank) right.fetch_add(1);
  });
  CHECK(right.load() == 4);
  auto single = make_mesh({"x"}, {1});
  run_spmd(single, [&](DeviceContext& device) { CHECK(&current_device() == &device); });
  CHECK_THROWS_AS(current_device(), Error);
}

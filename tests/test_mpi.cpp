// The MPI backend, c10d style: run plainly, this case re-executes the test binary under
// `mpirun -np 2` and checks that it passed; under mpirun, each process checks every collective with
// rank-dependent values (rank r contributes r + 1, so sums are known).
#include <doctest/doctest.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/comm/mpi.hpp"
#include "core/error.hpp"

using namespace dtrain;

#ifdef DTRAIN_HAS_MPI
namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string paths = path;
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string::npos) end = paths.size();
    std::filesystem::path candidate = std::filesystem::path(paths.substr(start, end - start)) / program;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// The checks each process runs under mpirun.
void check_collectives(Communicator& comm) {
  const int rank = comm.rank();
  const int n = comm.world_size();
  REQUIRE(n >= 2);
  CHECK(comm.backend() == "mpi");
  Group world;
  for (int r = 0; r < n; ++r) world.ranks.push_back(r);
  world.index = rank;
  const size_t count = 1001;  // odd, so nothing lines up by accident

  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = float(rank + 1) * float(i % 17);
  comm.all_reduce(world, data.data(), count, ReduceOp::Sum);
  for (size_t i = 0; i < count; ++i) REQUIRE(data[i] == float(n * (n + 1) / 2) * float(i % 17));

  for (size_t i = 0; i < count; ++i) data[i] = float((int(i) + rank) % n);
  comm.all_reduce(world, data.data(), count, ReduceOp::Max);
  for (size_t i = 0; i < count; ++i) REQUIRE(data[i] == float(n - 1));

  std::vector<float> send(count), gathered(count * n, -1.0f);
  for (size_t i = 0; i < count; ++i) send[i] = float(rank * 1000 + int(i % 997));
  comm.all_gather(world, send.data(), gathered.data(), count);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) REQUIRE(gathered[r * count + i] == float(r * 1000 + int(i % 997)));

  std::vector<float> chunks(count * n), reduced(count, -1.0f);
  for (int c = 0; c < n; ++c)
    for (size_t i = 0; i < count; ++i) chunks[c * count + i] = float(rank + 1 + 100 * c + int(i % 13));
  comm.reduce_scatter(world, chunks.data(), reduced.data(), count);
  for (size_t i = 0; i < count; ++i)
    REQUIRE(reduced[i] == float(n * (n + 1) / 2 + n * (100 * rank + int(i % 13))));

  std::vector<float> outgoing(count * n), incoming(count * n, -1.0f);
  for (int to = 0; to < n; ++to)
    for (size_t i = 0; i < count; ++i) outgoing[to * count + i] = float(rank * 100000 + to * 1000 + int(i % 997));
  comm.all_to_all(world, outgoing.data(), incoming.data(), count);
  for (int from = 0; from < n; ++from)
    for (size_t i = 0; i < count; ++i)
      REQUIRE(incoming[from * count + i] == float(from * 100000 + rank * 1000 + int(i % 997)));

  for (int root = 0; root < n; ++root) {
    for (size_t i = 0; i < count; ++i) data[i] = float(rank * 1000 + int(i % 997));
    comm.broadcast(world, data.data(), count, root);
    for (size_t i = 0; i < count; ++i) REQUIRE(data[i] == float(root * 1000 + int(i % 997)));
  }

  // A sub-group of one member (its own MPI communicator) and the world in reverse member order.
  Group alone{{rank}, 0};
  float x = float(rank + 1);
  comm.all_reduce(alone, &x, 1, ReduceOp::Sum);
  CHECK(x == float(rank + 1));
  Group reversed;
  for (int r = n - 1; r >= 0; --r) reversed.ranks.push_back(r);
  reversed.index = n - 1 - rank;
  comm.all_gather(reversed, send.data(), gathered.data(), count);
  for (int m = 0; m < n; ++m) REQUIRE(gathered[m * count] == float((n - 1 - m) * 1000));
  comm.barrier(world);
}

}  // namespace
#endif

TEST_CASE("MPI collectives across 2 processes") {
#ifndef DTRAIN_HAS_MPI
  MESSAGE("skipped: dtrain was built without MPI");
  CHECK_THROWS_WITH_AS(mpi_communicator(), "[mpi] dtrain was built without MPI", Error);
  return;
#else
  if (mpi_launched()) {
    auto comm = mpi_communicator();
    check_collectives(*comm);
    return;
  }
  if (!on_path("mpirun")) {
    MESSAGE("skipped: mpirun is not on PATH");
    return;
  }
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(length > 0);
  self[length] = '\0';
  std::string command = std::string("mpirun --allow-run-as-root --oversubscribe -np 2 '") + self +
                        "' --source-file='*/test_mpi.cpp' --no-intro --no-version --no-colors";
  int status = std::system(command.c_str());
  INFO("command: ", command);
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
#endif
}

// The process layer over MPI (see mpi.hpp). Every MPI call after initialization is made under one lock
// (MPI_THREAD_SERIALIZED asks no more), and collectives are started non-blocking and polled with
// MPI_Test from fibers::poll_until, so a waiting fiber never holds its thread.
#include "core/comm/mpi/mpi.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "core/fibers.hpp"

// Throws a dtrain::Error with MPI's own error string and where the call was made.
#define DTRAIN_CHECK_MPI(call)                                                                          \
  do {                                                                                                  \
    int dtrain_mpi_code = (call);                                                                       \
    if (dtrain_mpi_code != MPI_SUCCESS) {                                                               \
      char dtrain_mpi_text[MPI_MAX_ERROR_STRING];                                                       \
      int dtrain_mpi_length = 0;                                                                        \
      MPI_Error_string(dtrain_mpi_code, dtrain_mpi_text, &dtrain_mpi_length);                           \
      throw ::dtrain::Error(fmt::format("[mpi] {} failed at {}:{}: {}", #call, __FILE__, __LINE__,      \
                                        std::string(dtrain_mpi_text, size_t(dtrain_mpi_length))));     \
    }                                                                                                   \
  } while (0)

namespace dtrain {
namespace {

std::mutex mpi_lock;  // held for every MPI call once fibers may run
int world_index = 0, world_count = 1, node_count = 1;
std::vector<std::string> hosts{""};  // process p's host name, gathered at start-up
int distinct_hosts = 1;
MPI_Comm failure_comm = MPI_COMM_NULL;  // failed_alike's messages only: never mixed with a collective's
std::atomic<double> timeout_seconds{300.0};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int checked_int(size_t count, const char* what) {
  DTRAIN_CHECK(count <= size_t(INT_MAX), "[mpi] {} of {} elements exceeds MPI's int count", what, count);
  return int(count);
}

std::vector<int> ints(const std::vector<size_t>& counts, const char* what) {
  std::vector<int> out(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) out[i] = checked_int(counts[i], what);
  return out;
}

std::vector<int> offsets_of(const std::vector<int>& counts, const char* what) {
  std::vector<int> offsets(counts.size());
  size_t next = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = checked_int(next, what);
    next += size_t(counts[i]);
  }
  checked_int(next, what);
  return offsets;
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(MPI_Comm comm, std::vector<int> processes, std::string name)
      : comm_(comm), processes_(std::move(processes)), name_(std::move(name)) {}

  void do_all_reduce(float* data, size_t count, ReduceOp op) override {
    run("all_reduce", [&](MPI_Request* request) {
      return MPI_Iallreduce(MPI_IN_PLACE, data, checked_int(count, "all_reduce"), MPI_FLOAT,
                            op == ReduceOp::Sum ? MPI_SUM : MPI_MAX, comm_, request);
    });
  }

  void do_all_gather(float* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets) override {
    std::vector<int> sizes = ints(counts, "all_gather"), starts = ints(offsets, "all_gather");
    run("all_gather", [&](MPI_Request* request) {
      return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, sizes.data(), starts.data(), MPI_FLOAT, comm_,
                             request);
    });
  }

  std::vector<char> all_gather_bytes(const char* data, size_t bytes, std::vector<size_t>& sizes) override {
    std::vector<uint64_t> lengths(processes_.size());
    const uint64_t mine = bytes;
    run("all_gather (sizes)", [&](MPI_Request* request) {
      return MPI_Iallgather(&mine, 1, MPI_UINT64_T, lengths.data(), 1, MPI_UINT64_T, comm_, request);
    });
    sizes.assign(lengths.begin(), lengths.end());
    std::vector<int> counts = ints(sizes, "all_gather (bytes)");
    std::vector<int> starts = offsets_of(counts, "all_gather (bytes)");
    std::vector<char> out(size_t(starts.back()) + size_t(counts.back()));
    run("all_gather (bytes)", [&](MPI_Request* request) {
      return MPI_Iallgatherv(data, checked_int(bytes, "all_gather (bytes)"), MPI_BYTE, out.data(), counts.data(),
                             starts.data(), MPI_BYTE, comm_, request);
    });
    return out;
  }

  void do_reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) override {
    std::vector<int> sizes = ints(counts, "reduce_scatter");
    offsets_of(sizes, "reduce_scatter");  // the whole send must fit an int count too
    run("reduce_scatter", [&](MPI_Request* request) {
      return MPI_Ireduce_scatter(send, recv, sizes.data(), MPI_FLOAT, MPI_SUM, comm_, request);
    });
  }

  void do_all_to_all(const float* send, const std::vector<size_t>& send_counts, float* recv,
                  const std::vector<size_t>& recv_counts) override {
    std::vector<int> sends = ints(send_counts, "all_to_all"), recvs = ints(recv_counts, "all_to_all");
    std::vector<int> send_starts = offsets_of(sends, "all_to_all"), recv_starts = offsets_of(recvs, "all_to_all");
    run("all_to_all", [&](MPI_Request* request) {
      return MPI_Ialltoallv(send, sends.data(), send_starts.data(), MPI_FLOAT, recv, recvs.data(), recv_starts.data(),
                            MPI_FLOAT, comm_, request);
    });
  }

  void do_broadcast(float* data, size_t count, int root) override {
    run("broadcast", [&](MPI_Request* request) {
      return MPI_Ibcast(data, checked_int(count, "broadcast"), MPI_FLOAT, root, comm_, request);
    });
  }

  void barrier() override {
    run("barrier", [&](MPI_Request* request) { return MPI_Ibarrier(comm_, request); });
  }

 private:
  // Starts the operation, then polls it until done (other fibers run meanwhile) or the timeout passes.
  template <typename Start>
  void run(const char* what, Start&& start) {
    MPI_Request request = MPI_REQUEST_NULL;
    {
      std::lock_guard lock(mpi_lock);
      const int code = start(&request);
      if (code != MPI_SUCCESS) fail(what, code);
    }
    using Clock = std::chrono::steady_clock;
    const double limit = timeout_seconds.load();
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
    int done = 0, code = MPI_SUCCESS;
    bool late = false;
    fibers::poll_until([&] {
      {
        std::lock_guard lock(mpi_lock);
        code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      }
      late = !done && Clock::now() > deadline;
      return done || code != MPI_SUCCESS || late || (stop && stop->load());
    });
    if (code != MPI_SUCCESS) fail(what, code);
    // The request stays pending: the job is about to end (abort_processes), and MPI moves data only inside
    // MPI calls, so nothing lands in the buffers once they are gone.
    if (!done && !late) throw Error(fmt::format("[mpi] process {}: {} on {} abandoned: this process failed", world_index,
                                                what, name_));
    DTRAIN_CHECK(!late,
                 "[mpi] process {} ({}) waited {} s in {} on {} ({}) and gave up: a peer process is stuck or gone, or "
                 "its host unreachable (comm.timeout_s sets the limit; it must exceed the longest checkpoint save)",
                 world_index, hosts[size_t(world_index)], limit, what, name_, describe_processes(processes_));
  }

  [[noreturn]] void fail(const char* what, int code) const {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw Error(fmt::format("[mpi] process {}: {} on {} (processes {}) failed: {}", world_index, what, name_,
                            fmt::join(processes_, ","), std::string(text, size_t(length))));
  }

  MPI_Comm comm_;  // never freed: MPI_Finalize releases it, and freeing after finalize would be an error
  std::vector<int> processes_;
  std::string name_;
};

}  // namespace

bool mpi_launched() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

namespace {
// Every process's MPI_Get_processor_name, once at start-up (blocking: nothing else runs yet).
void gather_hosts() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  DTRAIN_CHECK_MPI(MPI_Get_processor_name(name, &length));
  std::vector<char> all(size_t(world_count) * MPI_MAX_PROCESSOR_NAME, '\0');
  DTRAIN_CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                 MPI_COMM_WORLD));
  hosts.assign(size_t(world_count), "");
  for (int p = 0; p < world_count; ++p) {
    const char* begin = all.data() + size_t(p) * MPI_MAX_PROCESSOR_NAME;
    hosts[size_t(p)] = std::string(begin, strnlen(begin, MPI_MAX_PROCESSOR_NAME));
  }
  std::vector<std::string> sorted = hosts;
  std::sort(sorted.begin(), sorted.end());
  distinct_hosts = int(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
}
}  // namespace

void initialize_processes() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!mpi_launched()) return;
    int initialized = 0;
    DTRAIN_CHECK_MPI(MPI_Initialized(&initialized));
    if (!initialized) {
      int provided = 0;
      DTRAIN_CHECK_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
      std::atexit(finalize_at_exit);
      DTRAIN_CHECK(provided >= MPI_THREAD_SERIALIZED,
                   "[mpi] this MPI library gives thread level {}, and dtrain's fibers need MPI_THREAD_SERIALIZED ({})",
                   provided, int(MPI_THREAD_SERIALIZED));
    }
    // Errors come back as codes (turned into dtrain::Error) instead of aborting the job unannounced.
    DTRAIN_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    DTRAIN_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_index));
    DTRAIN_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_count));
    DTRAIN_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &failure_comm));
    MPI_Comm node = MPI_COMM_NULL;
    DTRAIN_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    DTRAIN_CHECK_MPI(MPI_Comm_size(node, &node_count));
    MPI_Comm_free(&node);
    gather_hosts();
  });
}

int process_index() { return world_index; }
const std::string& process_host(int p) { return hosts.at(size_t(p)); }
int host_count() { return distinct_hosts; }

std::string describe_processes(const std::vector<int>& processes) {
  std::vector<std::string> order;  // hosts in the order their first process comes
  std::map<std::string, std::vector<int>> on_host;
  for (int p : processes) {
    const std::string& host = p >= 0 && size_t(p) < hosts.size() ? hosts[size_t(p)] : hosts[0];
    if (on_host.find(host) == on_host.end()) order.push_back(host);
    on_host[host].push_back(p);
  }
  if (order.size() == 1)
    return fmt::format("processes {} on host {}", fmt::join(processes, ","), order[0]);
  std::vector<std::string> parts;
  for (const std::string& host : order) parts.push_back(fmt::format("{} ({})", host, fmt::join(on_host[host], ",")));
  return fmt::format("processes {} on hosts {}", fmt::join(processes, ","), fmt::join(parts, ", "));
}
int process_count() { return world_count; }

int process_cores() {
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, node_count));
}

namespace {
// Every process, for the commands' own steps. Made at the first call, which every process makes at the
// same point (this is collective).
ProcessGroup& all_processes() {
  static const std::unique_ptr<ProcessGroup> everyone = [] {
    std::vector<int> processes(static_cast<size_t>(world_count));
    for (int p = 0; p < world_count; ++p) processes[size_t(p)] = p;
    return make_process_group(processes, "all processes");
  }();
  return *everyone;
}
}  // namespace

void barrier_processes() {
  if (world_count <= 1) return;
  all_processes().barrier();  // polled, so a peer that never comes is an error after comm.timeout_s
}

std::string first_process_value(const std::string& value) {
  if (world_count <= 1) return value;
  std::vector<size_t> sizes;
  const std::vector<char> all = all_processes().all_gather_bytes(value.data(), value.size(), sizes);
  return std::string(all.data(), sizes.at(0));
}

void abort_processes(int code) {
  if (world_count <= 1) return;
  std::fflush(stdout);
  std::fflush(stderr);
  std::lock_guard lock(mpi_lock);  // serialized with the other threads' polls
  MPI_Abort(MPI_COMM_WORLD, code);
}

bool failed_alike(const std::string& message, double grace_seconds) {
  if (world_count <= 1 || failure_comm == MPI_COMM_NULL) return false;
  // Each failed process sends the hash of its message to process 0, which answers each 1 ("all alike: I
  // print it") or 0; a process that hears nothing within the grace period decides alone (false).
  const uint64_t hash = std::hash<std::string>{}(message);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  constexpr int kHashTag = 1, kAnswerTag = 2;
  std::lock_guard lock(mpi_lock);  // no fiber polls any more: the command has failed
  // Polls `requests` until all are done or the deadline passes; true when all are done.
  auto wait_all = [&](std::vector<MPI_Request>& requests) {
    while (true) {
      int done = 0;
      if (MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return false;
      if (done) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  if (world_index == 0) {
    std::vector<uint64_t> hashes(size_t(world_count), 0);
    std::vector<MPI_Request> receives(size_t(world_count - 1), MPI_REQUEST_NULL);
    for (int p = 1; p < world_count; ++p)
      MPI_Irecv(&hashes[size_t(p)], 1, MPI_UINT64_T, p, kHashTag, failure_comm, &receives[size_t(p - 1)]);
    bool alike = wait_all(receives);
    for (int p = 1; alike && p < world_count; ++p) alike = hashes[size_t(p)] == hash;
    if (!alike) return false;  // the pending receives go with the job (abort_processes follows)
    const int answer = 1;
    std::vector<MPI_Request> sends(size_t(world_count - 1), MPI_REQUEST_NULL);
    for (int p = 1; p < world_count; ++p)
      MPI_Isend(&answer, 1, MPI_INT, p, kAnswerTag, failure_comm, &sends[size_t(p - 1)]);
    return wait_all(sends);
  }
  std::vector<MPI_Request> requests(2, MPI_REQUEST_NULL);
  int answer = 0;
  MPI_Isend(&hash, 1, MPI_UINT64_T, 0, kHashTag, failure_comm, &requests[0]);
  MPI_Irecv(&answer, 1, MPI_INT, 0, kAnswerTag, failure_comm, &requests[1]);
  return wait_all(requests) && answer == 1;
}

void set_collective_timeout(double seconds) {
  DTRAIN_CHECK_USAGE(seconds > 0, "[mpi] the collective timeout must be > 0 seconds, got {}", seconds);
  timeout_seconds = seconds;
}

double collective_timeout() { return timeout_seconds.load(); }

std::unique_ptr<ProcessGroup> make_process_group(const std::vector<int>& processes, std::string name) {
  initialize_processes();
  const auto found = std::find(processes.begin(), processes.end(), world_index);
  DTRAIN_CHECK(found != processes.end() && std::is_sorted(processes.begin(), processes.end()),
               "[mpi] process {} made a group of processes [{}] it is not in (or not ascending)", world_index,
               fmt::join(processes, ","));
  std::lock_guard lock(mpi_lock);
  MPI_Group world_group, member_group;
  DTRAIN_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  DTRAIN_CHECK_MPI(MPI_Group_incl(world_group, int(processes.size()), processes.data(), &member_group));
  MPI_Comm comm = MPI_COMM_NULL;
  // Collective over the members only; processes create their groups in one global order (the caller's
  // contract), so creations never cross.
  DTRAIN_CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, member_group, /*tag=*/0, &comm));
  MPI_Group_free(&member_group);
  MPI_Group_free(&world_group);
  DTRAIN_CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return std::make_unique<MpiProcessGroup>(comm, processes, std::move(name));
}

}  // namespace dtrain

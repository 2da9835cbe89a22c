// The MPI backend. A group becomes an MPI communicator whose rank order is the group's member order; it
// is made once per member list and cached. MPI_Comm_create_group is collective over the members only, so
// a group can be created whatever the other processes are doing at that moment (MPI_Comm_split would
// need every process of the world to join in at once).
#include "core/comm/mpi.hpp"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.hpp"

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

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void initialize_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    DTRAIN_CHECK_MPI(MPI_Initialized(&initialized));
    if (initialized) return;  // somebody else owns MPI's lifetime
    int provided = 0;
    DTRAIN_CHECK_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    // Errors come back as codes (turned into dtrain::Error) instead of aborting the job.
    DTRAIN_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    std::atexit(finalize_at_exit);
  });
}

int checked_count(size_t count, const char* what) {
  DTRAIN_CHECK(count <= size_t(INT_MAX), "[mpi] {} of {} elements exceeds MPI's int count", what, count);
  return int(count);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    DTRAIN_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    DTRAIN_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce(const Group& group, float* data, size_t count, ReduceOp op) override {
    MPI_Comm comm = communicator(group);
    DTRAIN_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data, checked_count(count, "all_reduce"), MPI_FLOAT,
                                   op == ReduceOp::Sum ? MPI_SUM : MPI_MAX, comm));
  }

  void all_gather(const Group& group, const float* send, float* recv, size_t count) override {
    MPI_Comm comm = communicator(group);
    int n = checked_count(count, "all_gather");
    checked_count(count * size_t(group.size()), "all_gather");
    DTRAIN_CHECK_MPI(MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm));
  }

  void reduce_scatter(const Group& group, const float* send, float* recv, size_t count) override {
    MPI_Comm comm = communicator(group);
    DTRAIN_CHECK_MPI(
        MPI_Reduce_scatter_block(send, recv, checked_count(count, "reduce_scatter"), MPI_FLOAT, MPI_SUM, comm));
  }

  void all_to_all(const Group& group, const float* send, float* recv, size_t count) override {
    MPI_Comm comm = communicator(group);
    int n = checked_count(count, "all_to_all");
    checked_count(count * size_t(group.size()), "all_to_all");
    DTRAIN_CHECK_MPI(MPI_Alltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm));
  }

  void broadcast(const Group& group, float* data, size_t count, int root) override {
    DTRAIN_CHECK(root >= 0 && root < group.size(), "[mpi] broadcast root {} is not a member index of a group of {}",
                 root, group.size());
    MPI_Comm comm = communicator(group);
    DTRAIN_CHECK_MPI(MPI_Bcast(data, checked_count(count, "broadcast"), MPI_FLOAT, root, comm));
  }

  void barrier(const Group& group) override { DTRAIN_CHECK_MPI(MPI_Barrier(communicator(group))); }

 private:
  // The MPI communicator of `group`, made on first use. Every member asks for it at the same point of the
  // program (the collectives' contract), so the collective creation matches up across processes.
  MPI_Comm communicator(const Group& group) {
    DTRAIN_CHECK(group.size() >= 1 && group.index >= 0 && group.index < group.size() &&
                     group.ranks[group.index] == rank_,
                 "[mpi] rank {} called a collective on group [{}] as member {}, which is not itself", rank_,
                 fmt::join(group.ranks, ","), group.index);
    if (group.size() == size_) {
      bool identity = true;
      for (int i = 0; i < size_ && identity; ++i) identity = group.ranks[i] == i;
      if (identity) return MPI_COMM_WORLD;
    }
    auto found = communicators_.find(group.ranks);
    if (found != communicators_.end()) return found->second;
    for (int member : group.ranks)
      DTRAIN_CHECK(member >= 0 && member < size_, "[mpi] group [{}] names rank {} outside a world of {}",
                   fmt::join(group.ranks, ","), member, size_);
    MPI_Group world_group, member_group;
    DTRAIN_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    DTRAIN_CHECK_MPI(MPI_Group_incl(world_group, group.size(), group.ranks.data(), &member_group));
    MPI_Comm comm = MPI_COMM_NULL;
    DTRAIN_CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, member_group, /*tag=*/0, &comm));
    MPI_Group_free(&member_group);
    MPI_Group_free(&world_group);
    DTRAIN_CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    int position = -1;
    DTRAIN_CHECK_MPI(MPI_Comm_rank(comm, &position));
    DTRAIN_CHECK(position == group.index, "[mpi] rank {} is member {} of group [{}] but MPI ranks it {}", rank_,
                 group.index, fmt::join(group.ranks, ","), position);
    communicators_.emplace(group.ranks, comm);
    return comm;
  }

  int rank_ = 0;
  int size_ = 1;
  // Never freed: MPI_Finalize releases them, and freeing after finalize would be an error.
  std::map<std::vector<int>, MPI_Comm> communicators_;
};

}  // namespace

bool mpi_launched() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

std::unique_ptr<Communicator> mpi_communicator() {
  initialize_once();
  return std::make_unique<MpiCommunicator>();
}

}  // namespace dtrain

// The communication layer: collectives among the ranks (devices) of a run, over any group of them. A rank
// calls its own Communicator; behind it, ranks of one process meet in memory (local: host buffers on
// fibers; device_local: GPU buffers, stream-ordered), and a group that spans processes takes the two-level
// algorithm (two_level.hpp) over a transport (transport.hpp: MPI, NCCL).
//
// Files by transport: this folder holds the interface, the two-level algorithm and what every backend shares;
// local/ the in-process worlds (host fibers, GPU devices), mpi/ MPI's transport and the CPU mesh's process
// groups, nccl/ NCCL's transport and the GPU mesh's world (built into the CUDA backend library).
//
// Invariants:
// - Every member of a group calls the same collectives on that group, in the same order, with the same
//   counts (c10d's contract). A group is the ranks along some mesh dims (Mesh::group); members are indexed
//   by their position in Group::ranks.
// - Buffers are float32 and live where the calling rank's tensors live (DeviceContext::place: host memory,
//   or its GPU, where the work is ordered on the rank's stream). Sending and receiving buffers never overlap
//   unless a method says in place.
// - Results belong to the caller: a collective writes into the caller's buffers, or hands over storage the
//   caller holds (shared_ptr), never a pointer into a peer's buffer. The shared gathers hand one READ-ONLY
//   result to the members of a process (written once instead of once per member).
// - A backend that cannot do a method throws "[comm] backend X has no Y"; nothing is emulated silently.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dtrain {

enum class ReduceOp { Sum, Max };

struct Group {
  std::vector<int> ranks;  // world ranks of the members, in member order
  int index = 0;           // this rank's position in `ranks`
  int size() const { return int(ranks.size()); }
};

// What all_gather_varying hands back: member i's counts[i] floats at members[i], all in `storage`, which the
// caller holds (with the other members of its process, read-only: const). Kept by the caller between calls,
// so its vectors are not reallocated.
struct VaryingGather {
  std::vector<const float*> members;
  std::vector<size_t> counts;
  std::shared_ptr<const float[]> storage;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;        // this device's world rank
  virtual int world_size() const = 0;  // all devices of the run
  virtual std::string backend() const = 0;

  // In place: data[i] = op over members of data[i].
  virtual void all_reduce(const Group& group, float* data, size_t count, ReduceOp op) = 0;
  // recv = concatenation of every member's `count` elements, in member order.
  virtual void all_gather(const Group& group, const float* send, float* recv, size_t count) = 0;
  // all_gather into a result the members of a process may SHARE (written once instead of once per member):
  // read-only unless the caller is its only owner.
  virtual std::shared_ptr<float[]> all_gather_shared(const Group& group, const float* send, size_t count);
  // The same, with no send buffer: write_chunk(chunk) writes this member's `count` floats straight into
  // the result (an optimizer writes its updated chunk there, saving a copy). Returns once every member
  // has written.
  virtual std::shared_ptr<float[]> all_gather_shared_in_place(const Group& group, size_t count,
                                                              const std::function<void(float* chunk)>& write_chunk);
  // Every member's `count` floats (each member's own count, not checked against the others'), copied into
  // `out.storage` (which the members of one process may share: const).
  virtual void all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out);
  // send holds group.size() chunks of `count`; recv gets the sum over members of chunk `index`.
  virtual void reduce_scatter(const Group& group, const float* send, float* recv, size_t count) = 0;
  // send holds group.size() chunks of `count`; chunk j goes to member j; recv chunk i came from member i.
  virtual void all_to_all(const Group& group, const float* send, float* recv, size_t count) = 0;
  // Point-to-point with the neighbours in member order (halo exchange): send holds group.size() chunks of
  // `count`, of which only those for members index - 1 and index + 1 must be delivered; recv's chunks
  // index - 1 and index + 1 get what those members sent to this one (the other chunks are unspecified).
  virtual void neighbour_exchange(const Group& group, const float* send, float* recv, size_t count);
  // In place: every member's data becomes member `root`'s.
  virtual void broadcast(const Group& group, float* data, size_t count, int root) = 0;
  virtual void barrier(const Group& group) = 0;

 protected:
  // "[comm] backend X has no Y": what the methods above throw where a backend does not implement them.
  [[noreturn]] void missing(const char* method) const;
};

}  // namespace dtrain

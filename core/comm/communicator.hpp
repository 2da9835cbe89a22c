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
// - Buffers are float32 views that say where they live (buffer_view.hpp): host memory, or the rank's GPU,
//   where the work is ordered on the rank's stream. A communicator serves one place (place(): the calling
//   rank's, DeviceContext::place), and every public method checks each buffer's place and length before
//   the backend sees it: a wrong place or count is an Error "[comm] ...", never a kernel on foreign memory.
//   Sending and receiving buffers never overlap unless a method says in place.
// - Results belong to the caller: a collective writes into the caller's buffers, or hands over storage the
//   caller holds (shared_ptr), never a pointer into a peer's buffer. The shared gathers hand one result to
//   the members of a process (written once instead of once per member), typed read-only: const floats.
// - A backend that cannot do a method throws "[comm] backend X has no Y"; nothing is emulated silently.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/buffer_view.hpp"
#include "core/place.hpp"

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

// The public methods check the buffers (place and length) and forward to the backend's do_* methods, which
// work on the checked memory with the counts of the contract below.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;        // this device's world rank
  virtual int world_size() const = 0;  // all devices of the run
  virtual std::string backend() const = 0;
  virtual Place place() const = 0;     // where this rank's buffers live: every buffer given must be there

  // In place: data[i] = op over members of data[i]. Under a bitwise::Scope, sums take the canonical
  // order (each member's data is a node of its tree; reduce_scatter likewise).
  void all_reduce(const Group& group, BufferView data, ReduceOp op);
  // recv (group.size() * send.count floats) = concatenation of every member's send, in member order.
  void all_gather(const Group& group, ConstBufferView send, BufferView recv);
  // all_gather into one result the members of a process SHARE (written once instead of once per member),
  // hence read-only; group.size() * send.count floats at place().
  std::shared_ptr<const float[]> all_gather_shared(const Group& group, ConstBufferView send);
  // The same, with no send buffer: write_chunk(chunk) writes this member's `count` floats straight into
  // the result (an optimizer writes its updated chunk there, saving a copy). Returns once every member
  // has written.
  std::shared_ptr<const float[]> all_gather_shared_in_place(const Group& group, size_t count,
                                                            const std::function<void(BufferView chunk)>& write_chunk);
  // Every member's send (each member's own count, not checked against the others'), copied into
  // `out.storage` (which the members of one process may share: const).
  void all_gather_varying(const Group& group, ConstBufferView send, VaryingGather& out);
  // send holds group.size() chunks of recv.count; recv gets the sum over members of chunk `index`.
  void reduce_scatter(const Group& group, ConstBufferView send, BufferView recv);
  // send and recv hold group.size() chunks each; chunk j goes to member j; recv chunk i came from member i.
  void all_to_all(const Group& group, ConstBufferView send, BufferView recv);
  // Point-to-point with the neighbours in member order (halo exchange): send holds group.size() chunks, of
  // which only those for members index - 1 and index + 1 must be delivered; recv's chunks index - 1 and
  // index + 1 get what those members sent to this one (the other chunks are unspecified).
  void neighbour_exchange(const Group& group, ConstBufferView send, BufferView recv);
  // In place: every member's data becomes member `root`'s.
  void broadcast(const Group& group, BufferView data, int root);
  virtual void barrier(const Group& group) = 0;
  // Whether do_all_reduce and do_reduce_scatter on `group` (of `count` floats per member) already add the
  // members in train.bitwise's canonical tree (core/bitwise.hpp) while a bitwise::Scope is on.
  virtual bool sums_in_tree_order(const Group& group, size_t count) const;

 protected:
  // The backend's side, on checked buffers at place(); `count` as in the methods above: all_gather's and
  // the shared gathers' per member, reduce_scatter's, all_to_all's and neighbour_exchange's per chunk.
  virtual void do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) = 0;
  virtual void do_all_gather(const Group& group, const float* send, float* recv, size_t count) = 0;
  virtual std::shared_ptr<const float[]> do_all_gather_shared(const Group& group, const float* send, size_t count);
  virtual std::shared_ptr<const float[]> do_all_gather_shared_in_place(
      const Group& group, size_t count, const std::function<void(BufferView chunk)>& write_chunk);
  virtual void do_all_gather_varying(const Group& group, const float* send, size_t count, VaryingGather& out);
  virtual void do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) = 0;
  virtual void do_all_to_all(const Group& group, const float* send, float* recv, size_t count) = 0;
  virtual void do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count);
  virtual void do_broadcast(const Group& group, float* data, size_t count, int root) = 0;

  // "[comm] backend X has no Y": what the do_* methods above throw where a backend does not implement them.
  [[noreturn]] void missing(const char* method) const;

 private:
  // Throws "[comm] ..." unless the buffer named `which` is at place() and holds `expected` floats.
  void check(const char* method, const char* which, ConstBufferView buffer, size_t expected) const;
  // Throws "[comm] ..." when send and recv share memory (no method but the in-place ones allows it).
  void check_apart(const char* method, ConstBufferView send, ConstBufferView recv) const;
  // Sums in train.bitwise's canonical order (core/bitwise.hpp), on any backend's gathers and all_to_all.
  static constexpr size_t kCanonicalGatherFloats = 4096;  // below: gather every member's values whole
  void canonical_all_reduce(const Group& group, BufferView data);
  void canonical_reduce_scatter(const Group& group, ConstBufferView send, BufferView recv);
};

}  // namespace dtrain

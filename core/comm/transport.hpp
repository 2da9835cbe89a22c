// A transport: the calls ONE process makes, for all of its members, on a group of processes (one
// communicator per mesh group that spans processes). MPI implements it over host memory (mpi.hpp's
// ProcessGroup); NCCL over the memory of the leader's GPU, stream-ordered on the caller's current stream
// (nccl.cpp). The two-level communicator (two_level.hpp) is written once over it.
//
// Contract: every process of the group makes the same calls in the same order. Blocks are per process of the
// group, in process order; counts are floats. A call returns once its data may be reused (MPI) or once it is
// enqueued on the stream (NCCL). Buffers are views (buffer_view.hpp) checked against the transport's place
// (host for MPI, the leader's GPU for NCCL) and against the blocks they must hold before the library sees them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/comm/communicator.hpp"

namespace dtrain {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;  // "mpi", "nccl": in messages
  virtual Place place() const = 0;       // where its buffers live
  void all_reduce(BufferView data, ReduceOp op);
  // In place: process i's block is data[offsets[i] .. offsets[i] + counts[i]), gathered into all.
  void all_gather(BufferView data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets);
  // send holds every process's block (counts[i] floats each, in order); recv (this process's count) gets the
  // sum of this process's.
  void reduce_scatter(ConstBufferView send, BufferView recv, const std::vector<size_t>& counts);
  // send_counts[i] floats to process i (consecutive in send), recv_counts[i] from process i into recv.
  void all_to_all(ConstBufferView send, const std::vector<size_t>& send_counts, BufferView recv,
                  const std::vector<size_t>& recv_counts);
  // In place: every process's data becomes process `root`'s.
  void broadcast(BufferView data, int root);
  virtual void barrier() = 0;
  // HOST bytes of any length from every process, concatenated in process order (sizes: each one's length).
  virtual std::vector<char> all_gather_bytes(const char* data, size_t bytes, std::vector<size_t>& sizes) = 0;

 protected:
  // The library's side, on checked buffers at place().
  virtual void do_all_reduce(float* data, size_t count, ReduceOp op) = 0;
  virtual void do_all_gather(float* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets) = 0;
  virtual void do_reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) = 0;
  virtual void do_all_to_all(const float* send, const std::vector<size_t>& send_counts, float* recv,
                             const std::vector<size_t>& recv_counts) = 0;
  virtual void do_broadcast(float* data, size_t count, int root) = 0;

 private:
  // Throws "[comm] ..." unless the buffer is at place() and holds at least `needed` floats.
  void check(const char* method, const char* which, ConstBufferView buffer, size_t needed) const;
};

}  // namespace dtrain

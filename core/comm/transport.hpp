// A transport: the calls ONE process makes, for all of its members, on a group of processes (one
// communicator per mesh group that spans processes). MPI implements it over host memory (mpi.hpp's
// ProcessGroup); NCCL over the memory of the leader's GPU, stream-ordered on the caller's current stream
// (nccl.cpp). The two-level communicator (two_level.hpp) is written once over it.
//
// Contract: every process of the group makes the same calls in the same order. Blocks are per process of the
// group, in process order; counts are floats. A call returns once its data may be reused (MPI) or once it is
// enqueued on the stream (NCCL).
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
  virtual void all_reduce(float* data, size_t count, ReduceOp op) = 0;
  // In place: process i's block is data[offsets[i] .. offsets[i] + counts[i]), gathered into all.
  virtual void all_gather(float* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets) = 0;
  // send holds every process's block (counts[i] floats each, in order); recv gets the sum of this process's.
  virtual void reduce_scatter(const float* send, float* recv, const std::vector<size_t>& counts) = 0;
  // send_counts[i] floats to process i (consecutive in send), recv_counts[i] from process i into recv.
  virtual void all_to_all(const float* send, const std::vector<size_t>& send_counts, float* recv,
                          const std::vector<size_t>& recv_counts) = 0;
  // In place: every process's data becomes process `root`'s.
  virtual void broadcast(float* data, size_t count, int root) = 0;
  virtual void barrier() = 0;
  // HOST bytes of any length from every process, concatenated in process order (sizes: each one's length).
  virtual std::vector<char> all_gather_bytes(const char* data, size_t bytes, std::vector<size_t>& sizes) = 0;
};

}  // namespace dtrain

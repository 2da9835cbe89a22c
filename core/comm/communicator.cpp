#include "core/comm/communicator.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "core/bitwise.hpp"
#include "core/dry_run.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace dtrain {

void Communicator::check(const char* method, const char* which, ConstBufferView buffer, size_t expected) const {
  if (buffer.place != place()) [[unlikely]]
    throw Error(fmt::format("[comm] {}: the {} buffer is at {}, but rank {}'s buffers live at {} (backend {})",
                            method, which, buffer.place.describe(), rank(), place().describe(), backend()));
  if (buffer.count != expected) [[unlikely]]
    throw Error(fmt::format("[comm] {}: the {} buffer holds {} floats, not {}", method, which, buffer.count, expected));
  if (buffer.data == nullptr && expected > 0) [[unlikely]]
    throw Error(fmt::format("[comm] {}: the {} buffer of {} floats is null", method, which, expected));
}

void Communicator::check_apart(const char* method, ConstBufferView send, ConstBufferView recv) const {
  if (send.count == 0 || recv.count == 0) return;
  const auto below = std::less<const float*>();  // a total order, even across allocations
  if (below(send.data, recv.data + recv.count) && below(recv.data, send.data + send.count)) [[unlikely]]
    throw Error(fmt::format("[comm] {}: the send and recv buffers overlap", method));
}

void Communicator::all_reduce(const Group& group, BufferView data, ReduceOp op) {
  check("all_reduce", "data", data, data.count);
  if (op == ReduceOp::Sum && group.size() > 1 && bitwise::active()) return canonical_all_reduce(group, data);
  do_all_reduce(group, data.data, data.count, op);
}

bool Communicator::sums_in_tree_order(const Group&, size_t) const { return false; }

// Under train.bitwise each member's data is one node of the canonical tree (bitwise.hpp), and the members'
// nodes combine in that tree: every member gets each other member's values (small sums), or a
// group.size()-th of them (all_to_all), adds them in the tree's order, and the chunks are gathered again.
// As many bytes as a ring all-reduce for large sums; the same bits on every member and on any split of
// the members into processes.
void Communicator::canonical_all_reduce(const Group& group, BufferView data) {
  DTRAIN_CHECK(data.place.is_cpu(), "[comm] train.bitwise sums on host buffers only, not at {}", data.place.describe());
  const size_t members = size_t(group.size()), count = data.count;
  // Two members' tree is their one addition, which every backend does (a + b = b + a): no gathers needed.
  if (members == 2 || sums_in_tree_order(group, count)) return do_all_reduce(group, data.data, count, ReduceOp::Sum);
  const bool dry = dry_run::active();  // a dry run counts the collectives and touches no scratch
  std::vector<const float*> parts(members);
  if (count <= kCanonicalGatherFloats) {
    Tensor all = Tensor::uninitialized({int64_t(members * count)});
    do_all_gather(group, data.data, all.data(), count);
    for (size_t j = 0; j < members; ++j) parts[j] = all.data() + j * count;
    if (!dry) bitwise::combine_members(parts.data(), int(members), data.data, count);
    return;
  }
  const size_t chunk = (count + members - 1) / members;
  Tensor send = Tensor::uninitialized({int64_t(members * chunk)}), received = Tensor::uninitialized(send.shape());
  Tensor mine = Tensor::uninitialized({int64_t(chunk)}), gathered = Tensor::uninitialized(send.shape());
  if (!dry) {
    std::copy_n(data.data, count, send.data());
    std::fill(send.data() + count, send.data() + send.size(), 0.0f);
  }
  do_all_to_all(group, send.data(), received.data(), chunk);
  for (size_t j = 0; j < members; ++j) parts[j] = received.data() + j * chunk;
  if (!dry) bitwise::combine_members(parts.data(), int(members), mine.data(), chunk);
  do_all_gather(group, mine.data(), gathered.data(), chunk);
  if (!dry) std::copy_n(gathered.data(), count, data.data);
}

void Communicator::canonical_reduce_scatter(const Group& group, ConstBufferView send, BufferView recv) {
  DTRAIN_CHECK(send.place.is_cpu(), "[comm] train.bitwise sums on host buffers only, not at {}", send.place.describe());
  const size_t members = size_t(group.size()), count = recv.count;
  if (members == 2 || sums_in_tree_order(group, members * count))  // as above
    return do_reduce_scatter(group, send.data, recv.data, count);
  Tensor received = Tensor::uninitialized({int64_t(members * count)});
  do_all_to_all(group, send.data, received.data(), count);
  std::vector<const float*> parts(members);
  for (size_t j = 0; j < members; ++j) parts[j] = received.data() + j * count;
  if (!dry_run::active()) bitwise::combine_members(parts.data(), int(members), recv.data, count);
}

void Communicator::all_gather(const Group& group, ConstBufferView send, BufferView recv) {
  check("all_gather", "send", send, send.count);
  check("all_gather", "recv", recv, size_t(group.size()) * send.count);
  check_apart("all_gather", send, recv);
  do_all_gather(group, send.data, recv.data, send.count);
}

std::shared_ptr<const float[]> Communicator::all_gather_shared(const Group& group, ConstBufferView send) {
  check("all_gather_shared", "send", send, send.count);
  return do_all_gather_shared(group, send.data, send.count);
}

std::shared_ptr<const float[]> Communicator::all_gather_shared_in_place(
    const Group& group, size_t count, const std::function<void(BufferView chunk)>& write_chunk) {
  return do_all_gather_shared_in_place(group, count, write_chunk);
}

void Communicator::all_gather_varying(const Group& group, ConstBufferView send, VaryingGather& out) {
  check("all_gather_varying", "send", send, send.count);
  do_all_gather_varying(group, send.data, send.count, out);
}

void Communicator::reduce_scatter(const Group& group, ConstBufferView send, BufferView recv) {
  check("reduce_scatter", "recv", recv, recv.count);
  check("reduce_scatter", "send", send, size_t(group.size()) * recv.count);
  check_apart("reduce_scatter", send, recv);
  if (group.size() > 1 && bitwise::active()) return canonical_reduce_scatter(group, send, recv);
  do_reduce_scatter(group, send.data, recv.data, recv.count);
}

namespace {
// all_to_all's and neighbour_exchange's chunk: a group.size()-th of the send, which the caller must divide.
size_t chunk_of(const char* method, const Group& group, ConstBufferView send) {
  const size_t n = size_t(group.size());
  if (n == 0 || send.count % n != 0) [[unlikely]]
    throw Error(fmt::format("[comm] {}: the send buffer's {} floats are not {} equal chunks", method, send.count, n));
  return send.count / n;
}
}  // namespace

void Communicator::all_to_all(const Group& group, ConstBufferView send, BufferView recv) {
  check("all_to_all", "send", send, send.count);
  const size_t count = chunk_of("all_to_all", group, send);
  check("all_to_all", "recv", recv, send.count);
  check_apart("all_to_all", send, recv);
  do_all_to_all(group, send.data, recv.data, count);
}

void Communicator::neighbour_exchange(const Group& group, ConstBufferView send, BufferView recv) {
  check("neighbour_exchange", "send", send, send.count);
  const size_t count = chunk_of("neighbour_exchange", group, send);
  check("neighbour_exchange", "recv", recv, send.count);
  check_apart("neighbour_exchange", send, recv);
  do_neighbour_exchange(group, send.data, recv.data, count);
}

void Communicator::broadcast(const Group& group, BufferView data, int root) {
  check("broadcast", "data", data, data.count);
  do_broadcast(group, data.data, data.count, root);
}

void Communicator::missing(const char* method) const {
  throw Error(fmt::format("[comm] backend {} has no {}", backend(), method));
}

std::shared_ptr<const float[]> Communicator::do_all_gather_shared(const Group&, const float*, size_t) {
  missing("all_gather_shared");
}

std::shared_ptr<const float[]> Communicator::do_all_gather_shared_in_place(const Group&, size_t,
                                                                          const std::function<void(BufferView)>&) {
  missing("all_gather_shared_in_place");
}

void Communicator::do_all_gather_varying(const Group&, const float*, size_t, VaryingGather&) {
  missing("all_gather_varying");
}

void Communicator::do_neighbour_exchange(const Group&, const float*, float*, size_t) {
  missing("neighbour_exchange");
}

}  // namespace dtrain

#include "core/comm/communicator.hpp"

#include <functional>

#include "core/error.hpp"

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
  do_all_reduce(group, data.data, data.count, op);
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

#include "core/comm/transport.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dtrain {
namespace {

size_t sum(const std::vector<size_t>& counts) {
  size_t total = 0;
  for (size_t count : counts) total += count;
  return total;
}

}  // namespace

void Transport::check(const char* method, const char* which, ConstBufferView buffer, size_t needed) const {
  if (buffer.place != place()) [[unlikely]]
    throw Error(fmt::format("[comm] {} over {}: the {} buffer is at {}, but the transport's buffers live at {}", method,
                            name(), which, buffer.place.describe(), place().describe()));
  if (buffer.count < needed || (buffer.data == nullptr && needed > 0)) [[unlikely]]
    throw Error(fmt::format("[comm] {} over {}: the {} buffer holds {} floats, fewer than the {} it needs", method,
                            name(), which, buffer.count, needed));
}

void Transport::all_reduce(BufferView data, ReduceOp op) {
  check("all_reduce", "data", data, data.count);
  do_all_reduce(data.data, data.count, op);
}

void Transport::all_gather(BufferView data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets) {
  size_t end = 0;
  for (size_t q = 0; q < counts.size() && q < offsets.size(); ++q) end = std::max(end, offsets[q] + counts[q]);
  DTRAIN_CHECK(counts.size() == offsets.size(), "[comm] all_gather over {}: {} counts but {} offsets", name(),
               counts.size(), offsets.size());
  check("all_gather", "data", data, end);
  do_all_gather(data.data, counts, offsets);
}

void Transport::reduce_scatter(ConstBufferView send, BufferView recv, const std::vector<size_t>& counts) {
  check("reduce_scatter", "send", send, sum(counts));
  check("reduce_scatter", "recv", recv, recv.count);
  do_reduce_scatter(send.data, recv.data, counts);
}

void Transport::all_to_all(ConstBufferView send, const std::vector<size_t>& send_counts, BufferView recv,
                           const std::vector<size_t>& recv_counts) {
  check("all_to_all", "send", send, sum(send_counts));
  check("all_to_all", "recv", recv, sum(recv_counts));
  do_all_to_all(send.data, send_counts, recv.data, recv_counts);
}

void Transport::broadcast(BufferView data, int root) {
  check("broadcast", "data", data, data.count);
  do_broadcast(data.data, data.count, root);
}

}  // namespace dtrain

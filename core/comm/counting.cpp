#include "core/comm/counting.hpp"

#include "core/dry_run.hpp"

namespace dtrain {

namespace {

// In a dry run (core/dry_run.hpp) a collective moves its payload only when it is small: the values of small
// ones steer host code (counts, stop flags, the sparse factors' lengths), large ones would write the pages a
// dry run leaves untouched. Every member decides alike: their counts are equal.
constexpr size_t kDryRunMovesFloats = size_t(16) << 10;
bool moves(size_t floats) { return !dry_run::active() || floats <= kDryRunMovesFloats; }

}  // namespace

void CountingCommunicator::do_all_reduce(const Group& group, float* data, size_t count, ReduceOp op) {
  note("all_reduce", group, count);
  if (moves(count)) inner_.all_reduce(group, at(data, count), op);
}

void CountingCommunicator::do_all_gather(const Group& group, const float* send, float* recv, size_t count) {
  note("all_gather", group, count);
  if (moves(count)) inner_.all_gather(group, at(send, count), at(recv, size_t(group.size()) * count));
}

std::shared_ptr<const float[]> CountingCommunicator::do_all_gather_shared_in_place(
    const Group& group, size_t count, const std::function<void(BufferView)>& write_chunk) {
  note("all_gather", group, count);
  if (moves(count)) return inner_.all_gather_shared_in_place(group, count, write_chunk);
  std::shared_ptr<float[]> gathered = dry_run::allocate(size_t(group.size()) * count);
  write_chunk(BufferView{gathered.get() + size_t(group.index) * count, count, place()});
  return gathered;
}

std::shared_ptr<const float[]> CountingCommunicator::do_all_gather_shared(const Group& group, const float* send,
                                                                          size_t count) {
  note("all_gather", group, count);
  if (moves(count)) return inner_.all_gather_shared(group, at(send, count));
  return dry_run::allocate(size_t(group.size()) * count);
}

void CountingCommunicator::do_all_gather_varying(const Group& group, const float* send, size_t count,
                                                 VaryingGather& out) {
  note("all_gather", group, count);
  if (!dry_run::active()) return inner_.all_gather_varying(group, at(send, count), out);
  // Dry: the members' payloads differ in length, so none moves (they could not agree on which to move); each
  // member is handed its own payload for every member's (a dry run's batches are alike on every member).
  out.storage = dry_run::allocate(size_t(group.size()) * count);  // the gathered storage's bytes, counted
  out.members.assign(size_t(group.size()), send);
  out.counts.assign(size_t(group.size()), count);
}

void CountingCommunicator::do_reduce_scatter(const Group& group, const float* send, float* recv, size_t count) {
  note("reduce_scatter", group, count * group.size());
  if (moves(count)) inner_.reduce_scatter(group, at(send, size_t(group.size()) * count), at(recv, count));
}

void CountingCommunicator::do_all_to_all(const Group& group, const float* send, float* recv, size_t count) {
  note("all_to_all", group, count * group.size());
  if (moves(count)) inner_.all_to_all(group, at(send, size_t(group.size()) * count), at(recv, size_t(group.size()) * count));
}

// Counted as the all_to_all it is in every backend.
void CountingCommunicator::do_neighbour_exchange(const Group& group, const float* send, float* recv, size_t count) {
  note("all_to_all", group, count * group.size());
  if (moves(count)) inner_.neighbour_exchange(group, at(send, size_t(group.size()) * count), at(recv, size_t(group.size()) * count));
}

void CountingCommunicator::do_broadcast(const Group& group, float* data, size_t count, int root) {
  note("broadcast", group, count);
  if (moves(count)) inner_.broadcast(group, at(data, count), root);
}

void CountingCommunicator::barrier(const Group& group) {
  note("barrier", group, 0);
  inner_.barrier(group);
}

}  // namespace dtrain

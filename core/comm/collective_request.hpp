// What a member of an in-process collective asks for, which every member of the call must agree on: the
// host-memory (local.cpp) and device-memory (device_local.cpp) communicators check it alike.
#pragma once
#include <cstddef>
#include <string>

#include "core/comm/communicator.hpp"
#include "core/error.hpp"

namespace dtrain::collective {

enum class Kind {
  AllReduce,
  AllGather,
  AllGatherShared,
  AllGatherInPlace,
  AllGatherVarying,
  ReduceScatter,
  AllToAll,
  Broadcast,
  Barrier
};

inline const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::AllGather: return "all_gather";
    case Kind::AllGatherShared: return "all_gather_shared";
    case Kind::AllGatherInPlace: return "all_gather_shared_in_place";
    case Kind::AllGatherVarying: return "all_gather_varying";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::AllToAll: return "all_to_all";
    case Kind::Broadcast: return "broadcast";
    case Kind::Barrier: return "barrier";
  }
  return "?";
}

struct Request {
  Kind kind = Kind::Barrier;
  size_t count = 0;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;

  bool operator==(const Request& other) const {
    return kind == other.kind && count == other.count && op == other.op && root == other.root;
  }
  std::string describe() const {
    std::string text = fmt::format("{}(count={}", kind_name(kind), count);
    if (kind == Kind::AllReduce) text += op == ReduceOp::Sum ? ", op=sum" : ", op=max";
    if (kind == Kind::Broadcast) text += fmt::format(", root={}", root);
    return text + ")";
  }
};

}  // namespace dtrain::collective

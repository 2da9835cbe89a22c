#include "core/comm/span_layout.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace dtrain {

int SpanLayout::process_of_member(int member) const {
  for (size_t q = 0; q < processes.size(); ++q)
    if (member >= first[q] && member < first[q] + count[q]) return int(q);
  throw Error(fmt::format("[comm] member {} is in no process of the group", member));
}

bool SpanLayout::even() const {
  return std::all_of(count.begin(), count.end(), [&](int c) { return c == count.front(); });
}

SpanLayout span_layout(const std::vector<int>& ranks, const Placement& placement) {
  DTRAIN_CHECK(std::is_sorted(ranks.begin(), ranks.end()), "[comm] group [{}] is not in ascending rank order",
               fmt::join(ranks, ","));
  SpanLayout layout;
  for (int member = 0; member < int(ranks.size()); ++member) {
    const int process = placement.process_of(ranks[size_t(member)]);
    if (layout.processes.empty() || layout.processes.back() != process) {
      layout.processes.push_back(process);
      layout.first.push_back(member);
      layout.count.push_back(0);
    }
    ++layout.count.back();
  }
  const auto mine = std::find(layout.processes.begin(), layout.processes.end(), placement.process);
  if (mine != layout.processes.end()) layout.mine = int(mine - layout.processes.begin());
  return layout;
}

std::vector<std::vector<int>> mesh_groups(const Mesh& mesh) {
  std::vector<int> dims;
  for (int d = 0; d < mesh.num_dims(); ++d)
    if (mesh.dim_sizes()[size_t(d)] > 1) dims.push_back(d);
  DTRAIN_CHECK(dims.size() < 24, "[mesh] {} dims of size > 1 is too many to spread over processes", dims.size());
  std::vector<std::vector<int>> out;
  for (uint32_t subset = 1; subset < (1u << dims.size()); ++subset) {
    std::vector<std::string> names;
    for (size_t i = 0; i < dims.size(); ++i)
      if (subset & (1u << i)) names.push_back(mesh.dim_names()[size_t(dims[i])]);
    for (int rank = 0; rank < mesh.size(); ++rank) {
      bool lowest = true;  // the group's lowest rank has coordinate 0 on every dim it varies along
      for (size_t i = 0; i < dims.size() && lowest; ++i)
        if (subset & (1u << i)) lowest = mesh.coord_at(rank, dims[i]) == 0;
      if (!lowest) continue;
      std::vector<int> ranks = mesh.group(rank, names);
      if (std::find(out.begin(), out.end(), ranks) == out.end()) out.push_back(std::move(ranks));
    }
  }
  return out;
}

}  // namespace dtrain

// What `dtrain elastic` decides between two launches, kept apart from the launching so it can be tested
// alone: the hosts of a hostfile, which hosts mpirun's output says were lost, and the mesh the devices left
// can hold.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/config.hpp"

namespace dtrain::elastic {

// One line of an Open MPI hostfile: "NAME [slots=N]" (N processes; 1 when not given).
struct Host {
  std::string name;
  int slots = 1;
};

// The hosts of an Open MPI hostfile ('#' starts a comment). UsageError naming FILE:LINE for a line it cannot
// read, a host named twice, or a file with no host.
std::vector<Host> read_hostfile(const std::string& path);
// The hostfile text for `hosts`, in their order.
std::string hostfile_text(const std::vector<Host>& hosts);
int slot_count(const std::vector<Host>& hosts);
// The MPI ranks mpirun gives host `index` when it fills `hosts` slot by slot in their order.
std::vector<int> ranks_of(const std::vector<Host>& hosts, size_t index);

// The hosts of `hosts` that mpirun's output (stdout and stderr) names as lost: a daemon it lost
// communication with ("Remote daemon: [[J,0],D] on node NAME"), or one that could not start on it. In the
// order of `hosts`.
std::vector<std::string> lost_hosts(const std::string& output, const std::vector<Host>& hosts);

// `processes` spread over `hosts` one per host in turn (at most each host's slots), so that a job uses as
// many hosts as it can: the hostfile mpirun gets, each host with the slots it fills.
std::vector<Host> spread(const std::vector<Host>& hosts, int processes);
// The most processes, up to `slots`, that share `devices` evenly.
int processes_for(int devices, int slots);

// The mesh for a relaunch on at most `slots` processes. Every dim but `batch_dim` keeps its size; the batch
// dim is the largest, up to its size in `dims`, that gives each process at most `devices_per_process` devices and divides
// `global_batch` (a power of two up to 8 when `powers_of_two`: train.bitwise's leaves), on as many of the
// slots as can share the mesh's devices evenly.
struct Relaunch {
  std::vector<MeshDimConfig> dims;
  int processes = 0;
};
Relaunch replan_mesh(const std::vector<MeshDimConfig>& dims, const std::string& batch_dim, std::int64_t global_batch,
                     int devices_per_process, int slots, bool powers_of_two);
// For a mesh with an `auto` dim (sized by the process count at run time): the most processes, up to
// `slots`, whose auto size is whole, divides `global_batch` when the auto dim is `batch_dim`, and is a power of
// two up to 8 when `powers_of_two`. 0 when the mesh has no auto dim.
int auto_processes(const std::vector<MeshDimConfig>& dims, const std::string& batch_dim, std::int64_t global_batch,
                   int slots, bool powers_of_two);
// `dims` with its auto dim sized for `processes` (config.cpp's rule: processes over the other dims' product, or
// 1 when that product is a multiple of them) and no longer marked auto; 0 as its size when neither divides.
std::vector<MeshDimConfig> auto_sized(const std::vector<MeshDimConfig>& dims, int processes);

// "{batch: 4, model: 2}": the form `--set mesh.dims=...` takes.
std::string dims_text(const std::vector<MeshDimConfig>& dims);

// The dim of `config`'s mesh that shards the batch: the input layout's first entry when it names a mesh dim,
// else a dim called "batch". UsageError when there is none (elastic then cannot shrink the mesh).
std::string batch_dim_of(const Config& config);

}  // namespace dtrain::elastic

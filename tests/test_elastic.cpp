// `dtrain elastic`'s decisions between launches (engine/elastic_plan.hpp): hostfiles, which hosts mpirun's
// output names as lost, how processes spread over hosts, and the mesh planned for the devices left.
// The launches themselves are tests/e2e/multihost.sh.
#include <doctest/doctest.h>

#include <fstream>

#include "engine/elastic_plan.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Parsing only: no data.path need exist.
dtrain::LoadOptions no_data_check() {
  dtrain::LoadOptions options;
  options.check_data_path = false;
  return options;
}

std::string write(const TempFolder& folder, const std::string& text) {
  const std::string path = (folder / "hostfile").string();
  std::ofstream(path) << text;
  return path;
}

std::string sizes(const std::vector<MeshDimConfig>& dims) { return elastic::dims_text(dims); }

}  // namespace

TEST_CASE("a hostfile: hosts with their slots in order; comments and blank lines skipped; errors name FILE:LINE") {
  TempFolder folder("elastic_hostfile");
  const auto hosts = elastic::read_hostfile(write(folder, "# cluster\n10.0.0.1 slots=2\n\nnode-b   # one slot\nc slots=4 max_slots=8\n"));
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].name == "10.0.0.1");
  CHECK(hosts[0].slots == 2);
  CHECK(hosts[1].name == "node-b");
  CHECK(hosts[1].slots == 1);
  CHECK(hosts[2].slots == 4);
  CHECK(elastic::slot_count(hosts) == 7);
  CHECK(elastic::hostfile_text(hosts) == "10.0.0.1 slots=2\nnode-b slots=1\nc slots=4\n");
  CHECK(elastic::ranks_of(hosts, 0) == std::vector<int>{0, 1});
  CHECK(elastic::ranks_of(hosts, 2) == std::vector<int>{3, 4, 5, 6});

  const std::string bad_slots = usage_error_message([&] { elastic::read_hostfile(write(folder, "a\nb slots=zero\n")); });
  CHECK(bad_slots.find("hostfile:2: 'slots=zero'") != std::string::npos);
  CHECK(usage_error_message([&] { elastic::read_hostfile(write(folder, "a slots=0\n")); }).find("hostfile:1:") !=
        std::string::npos);
  CHECK(usage_error_message([&] { elastic::read_hostfile(write(folder, "a\nb\na slots=2\n")); })
            .find("hostfile:3: host 'a' is named twice") != std::string::npos);
  CHECK(usage_error_message([&] { elastic::read_hostfile(write(folder, "# nothing\n\n")); }).find("names no host") !=
        std::string::npos);
  CHECK(usage_error_message([&] { elastic::read_hostfile((folder / "absent").string()); }).find("cannot read") !=
        std::string::npos);
}

TEST_CASE("lost hosts are the hostfile's hosts that mpirun names as lost, in hostfile order") {
  const std::vector<elastic::Host> hosts{{"10.213.0.11", 2}, {"10.213.0.12", 1}, {"10.213.0.13", 1}};
  // Open MPI 4.1's message when a daemon dies or its host is cut off.
  const std::string lost_daemon =
      "ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[30654,0],0] on node vm\n"
      "  Remote daemon: [[30654,0],2] on node 10.213.0.12\n\nThis is usually due to ...\n";
  CHECK(elastic::lost_hosts(lost_daemon, hosts) == std::vector<std::string>{"10.213.0.12"});
  // A peer named by a survivor's TCP transport, or a process that ended on a signal, is no lost host: the
  // daemon is what says a host is gone.
  const std::string peer_hung_up =
      "  Local host: 10.213.0.13\n  Local PID:  10344\n  Peer host:  10.213.0.12\n"
      "mpirun noticed that process rank 1 with PID 77 on node 10.213.0.11 exited on signal 9 (Killed).\n";
  CHECK(elastic::lost_hosts(peer_hung_up, hosts).empty());
  // A name that merely starts like a host's is not that host; the head node is not in the list.
  CHECK(elastic::lost_hosts("Remote daemon: [[1,0],1] on node 10.213.0.111\n", hosts).empty());
  CHECK(elastic::lost_hosts("Remote daemon: [[1,0],0] on node vm\n", hosts).empty());
  CHECK(elastic::lost_hosts(lost_daemon + "Remote daemon: [[30654,0],1] on node 10.213.0.11\n", hosts) ==
        std::vector<std::string>{"10.213.0.11", "10.213.0.12"});
}

TEST_CASE("processes spread over hosts one per host in turn, within each host's slots") {
  const std::vector<elastic::Host> hosts{{"a", 2}, {"b", 2}, {"c", 1}};
  CHECK(elastic::hostfile_text(elastic::spread(hosts, 2)) == "a slots=1\nb slots=1\n");
  CHECK(elastic::hostfile_text(elastic::spread(hosts, 4)) == "a slots=2\nb slots=1\nc slots=1\n");
  CHECK(elastic::hostfile_text(elastic::spread(hosts, 5)) == "a slots=2\nb slots=2\nc slots=1\n");
  CHECK(thrown([&] { elastic::spread(hosts, 6); }) == "error");
  CHECK(elastic::processes_for(8, 6) == 4);
  CHECK(elastic::processes_for(8, 3) == 2);
  CHECK(elastic::processes_for(12, 6) == 6);
  CHECK(elastic::processes_for(7, 6) == 1);
}

TEST_CASE("the mesh planned again keeps every dim but the batch dim and the global batch") {
  const std::vector<MeshDimConfig> dp{{"batch", 8}};
  const std::vector<MeshDimConfig> mp{{"batch", 4}, {"model", 2}};
  // 8 devices on 4 processes (2 each); 2 processes left: {batch: 4}.
  elastic::Relaunch relaunch = elastic::replan_mesh(dp, "batch", 64, 2, 2, false);
  CHECK(sizes(relaunch.dims) == "{batch: 4}");
  CHECK(relaunch.processes == 2);
  // Slots enough for the whole mesh: the mesh is kept.
  relaunch = elastic::replan_mesh(dp, "batch", 64, 2, 4, false);
  CHECK(sizes(relaunch.dims) == "{batch: 8}");
  CHECK(relaunch.processes == 4);
  // 3 processes left of 2 devices each: 6 devices, {batch: 6} divides no batch of 64: 2 processes hold {batch: 4}.
  relaunch = elastic::replan_mesh(dp, "batch", 64, 2, 3, false);
  CHECK(sizes(relaunch.dims) == "{batch: 4}");
  CHECK(relaunch.processes == 2);
  // ... and a batch of 96 takes {batch: 6} on the 3.
  relaunch = elastic::replan_mesh(dp, "batch", 96, 2, 3, false);
  CHECK(sizes(relaunch.dims) == "{batch: 6}");
  CHECK(relaunch.processes == 3);
  // train.bitwise keeps the batch dim a power of two up to 8 (its leaves).
  relaunch = elastic::replan_mesh(dp, "batch", 96, 2, 3, true);
  CHECK(sizes(relaunch.dims) == "{batch: 4}");
  CHECK(relaunch.processes == 2);
  // The model dim stays 2; the batch dim shrinks.
  relaunch = elastic::replan_mesh(mp, "batch", 64, 2, 2, false);
  CHECK(sizes(relaunch.dims) == "{batch: 2, model: 2}");
  CHECK(relaunch.processes == 2);
  // One process of 1 device cannot hold model: 2.
  CHECK(usage_error_message([&] { elastic::replan_mesh(mp, "batch", 64, 1, 1, false); }).find("cannot hold") !=
        std::string::npos);
  CHECK(usage_error_message([&] { elastic::replan_mesh(mp, "data", 64, 2, 2, false); }).find("no dim 'data'") !=
        std::string::npos);
}

TEST_CASE("mesh.dims may size one dim `auto` from the process count; elastic then picks the processes") {
  const std::string text = "mesh: {dims: {batch: auto, model: 2}}\n"
                           "data: {dataset: mnist, path: data, batch_size: 64, image_shape: flat}\n"
                           "model: [{dense: 10}]\n"
                           "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}\n";
  // One process: model 2 is a multiple of it, so batch is 1 (2 devices in the process).
  const Config config = parse_config(text, "auto.yaml", no_data_check());
  REQUIRE(config.mesh.dims.size() == 2);
  CHECK(config.mesh.dims[0].automatic);
  CHECK(config.mesh.dims[0].size == 1);
  CHECK(config.mesh.num_devices() == 2);
  CHECK(elastic::dims_text(config.mesh.dims) == "{batch: auto, model: 2}");
  CHECK(usage_error_message([&] {
          parse_config("mesh: {dims: {batch: auto, model: auto}}\n" + text.substr(text.find("data:")), "two.yaml",
                           no_data_check());
        }).find("one dim at most may be auto") != std::string::npos);
  // 6 slots: 6 processes give batch 3, which divides no batch of 64: 4 processes give 2.
  CHECK(elastic::auto_processes(config.mesh.dims, "batch", 64, 6, false) == 4);
  CHECK(elastic::auto_processes(config.mesh.dims, "batch", 96, 6, false) == 6);
  CHECK(elastic::auto_processes(config.mesh.dims, "batch", 96, 6, true) == 4);  // bitwise: powers of two
  CHECK(elastic::auto_processes(config.mesh.dims, "batch", 64, 1, false) == 1);  // 2 devices in one process
  CHECK(elastic::auto_processes({{"batch", 8}}, "batch", 64, 6, false) == 0);    // no auto dim
  CHECK(elastic::dims_text(elastic::auto_sized(config.mesh.dims, 4)) == "{batch: 2, model: 2}");
  CHECK(elastic::dims_text(elastic::auto_sized(config.mesh.dims, 1)) == "{batch: 1, model: 2}");
  CHECK(elastic::dims_text(elastic::auto_sized(config.mesh.dims, 3)) == "{batch: 0, model: 2}");  // neither divides
}

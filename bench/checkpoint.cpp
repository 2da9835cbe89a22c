// Checkpoint save and restore of a ~67M-parameter MLP with Adam (~805 MB of state) on 8 virtual devices,
// against this disk's own sequential bandwidth measured in the same run (dd with fdatasync; a read after
// dropping the file from the page cache). Restore onto another mesh and layout is compared with restore
// onto the same one; the checksum pass every restore makes (verify_files: each file's size and XXH3-128
// against the manifest) is timed alone, cold and warm, on its threads and on one. Every restored value is
// checked. Usage: bench_checkpoint [SCRATCH_DIR]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/config.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/writer.hpp"
#include "core/checkpoint/state.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

using namespace dtrain;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// 4096 -> 8192 -> 4096: 67.1M parameters.
std::string config_text(const std::string& mesh, const std::string& layouts) {
  return fmt::format(R"(
mesh: {{dims: {}}}
data: {{dataset: mnist, path: unused, batch_size: 64}}
model:
  - {{dense: 8192, activation: relu, init: {{uniform: {{seed: [1, 2]}}}}}}
  - {{dense: 4096, init: {{uniform: {{seed: [3, 4]}}}}}}
layouts: {}
train: {{epochs: 1, optimizer: {{adam: {{learning_rate: 0.001}}}}}}
)",
                     mesh, layouts);
}

struct Setup {
  Config config;
  MeshPtr mesh;
  BuiltModel built;
};

Setup make_setup(const std::string& mesh, const std::string& layouts) {
  Setup setup{parse_config(config_text(mesh, layouts), "bench.yaml", LoadOptions{{}, "", false, "", {}}), nullptr, {}};
  setup.mesh = build_mesh(setup.config);
  setup.built = build_model(setup.config, setup.mesh, {4096});
  return setup;
}

// Slots hold values derived from their variable so that any layout's expected values are known.
float slot_value(float variable, int slot) { return variable * (slot == 0 ? 0.5f : 0.25f); }

int64_t status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1));
  return 0;
}

void drop_from_page_cache(const fs::path& path) {
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    if (!entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

double run_seconds(const std::string& command) {
  const auto start = Clock::now();
  DTRAIN_CHECK(std::system(command.c_str()) == 0, "[bench] failed: {}", command);
  return seconds_since(start);
}

// Restores the latest checkpoint onto `setup` (cold page cache): read_index (which verifies every file
// against the manifest) once, then every rank's restore; returns seconds; counts wrong values. Without
// `with_checksum_pass`, the index is read first, the page cache dropped again, and only the ranks'
// restore is timed: the restore as it would be without the checksum pass.
double restore(const Setup& setup, const fs::path& dir, int64_t* wrong, double* index_seconds = nullptr,
               bool with_checksum_pass = true) {
  drop_from_page_cache(dir);
  std::atomic<int64_t> mismatches{0};
  const auto start = Clock::now();
  const checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(dir.string()));
  double read_index_seconds = seconds_since(start);
  if (index_seconds) *index_seconds = read_index_seconds;
  if (!with_checksum_pass) {
    drop_from_page_cache(dir);
    read_index_seconds = 0;
  }
  double seconds = 0;  // the ranks' restore, between barriers (building the expected values is not timed)
  run_spmd(setup.mesh, [&](DeviceContext& device) {
    nn::Parameters expected = setup.built.model->initialize(device.rank);
    nn::Parameters params;
    for (const auto& path : expected.paths()) {
      const DTensor& value = expected.at(path).value();
      params.add(path, Var(DTensor(value.global_shape(), value.layout(), Tensor(value.local().shape())), true));
    }
    std::unique_ptr<optim::Optimizer> optimizer = optim::make_adam({});
    optimizer->build(params);
    train::Position position;
    train::RankState state{device.rank, params, *optimizer, position};
    const Group everyone = device.group(device.mesh->dim_names());
    device.comm->barrier(everyone);
    const auto restore_start = Clock::now();
    checkpoint::restore(index, state, true);
    device.comm->barrier(everyone);
    if (device.rank == 0) seconds = seconds_since(restore_start);
    // Check: variables equal their initializer's values; slots derive from them.
    int64_t bad = 0;
    for (const auto& path : expected.paths()) {
      const Tensor& want = expected.at(path).value().local();
      const Tensor& got = params.at(path).value().local();
      for (int64_t i = 0; i < want.size(); ++i) bad += !(want[i] == got[i]);  // a NaN counts
    }
    for (auto& [name, slot] : optimizer->slots()) {
      const std::string path = name.substr(0, name.rfind('/'));
      const int which = name.ends_with("/m") ? 0 : 1;
      const DTensor& variable = expected.at(path).value();
      DTensor want = redistribute(variable, slot->layout());
      for (int64_t i = 0; i < want.local().size(); ++i) bad += !(slot_value(want.local()[i], which) == slot->local()[i]);
    }
    mismatches += bad;
  });
  *wrong = mismatches;
  return read_index_seconds + seconds;
}

// The checksum pass alone over the latest checkpoint: verify_files (its threads) or each file in turn.
double verify_seconds(const fs::path& dir, bool cold, bool threaded) {
  const std::string folder = checkpoint::find_checkpoint(dir.string());
  if (cold) drop_from_page_cache(dir);
  const checkpoint::Manifest manifest = checkpoint::read_manifest(folder);
  const auto start = Clock::now();
  if (threaded) {
    checkpoint::verify_files(folder, manifest);
  } else {
    for (const auto& file : manifest.files) checkpoint::verify_file(folder, file);
  }
  return seconds_since(start);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // Works in a folder of its own inside the given one (never removing anything it did not create).
  const fs::path parent = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path();
  const fs::path scratch = parent / fmt::format("dtrain_bench_checkpoint_{}", ::getpid());
  fs::create_directories(parent);
  if (!fs::create_directory(scratch)) {
    fmt::print(stderr, "bench_checkpoint: {} exists already\n", scratch.string());
    return 1;
  }
  const fs::path dir = scratch / "ckpt";
  try {
    Setup saved = make_setup("{model: 8}", "{dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}");
    int64_t state_bytes = 0, largest_shard_bytes = 0;
    std::vector<int64_t> file_bytes(size_t(saved.mesh->size()), 0);  // what each rank's shard file holds
    for (const auto& info : saved.built.model->variables()) {
      state_bytes += 3 * 4 * num_elements(info.shape);  // value, m, v
      const int64_t block = 4 * num_elements(info.choice.layout.local_shape(info.shape));
      largest_shard_bytes = std::max(largest_shard_bytes, block);
      for (int rank = 0; rank < saved.mesh->size(); ++rank)
        if (checkpoint::writes_shard(info.choice.layout, rank)) file_bytes[size_t(rank)] += 3 * block;
    }
    // A save builds one shard file at a time in memory before writing it: its extra memory is about the
    // largest shard file.
    const int64_t largest_file_bytes = *std::max_element(file_bytes.begin(), file_bytes.end());
    const std::string name = fmt::format("checkpoint {:.1f}M params adam ({} MB state) on 8 virtual devices",
                                         double(saved.built.model->num_parameters()) / 1e6, state_bytes >> 20);

    // Peer: this disk's sequential write (fdatasync) and cold read of as many bytes.
    const fs::path peer_file = scratch / "dd.bin";
    const int64_t megabytes = state_bytes >> 20;
    const double dd_write = run_seconds(fmt::format("dd if=/dev/zero of={} bs=1M count={} conv=fdatasync status=none",
                                                    peer_file.string(), megabytes));
    drop_from_page_cache(scratch);
    const double dd_read = run_seconds(fmt::format("dd if={} of=/dev/null bs=1M status=none", peer_file.string()));
    fs::remove(peer_file);
    const double peer_write_bps = double(megabytes << 20) / dd_write, peer_read_bps = double(megabytes << 20) / dd_read;

    // Save (3 times; max_to_keep 1 so each prunes the previous): time and peak extra memory.
    checkpoint::CheckpointManager manager(dir.string(), 1, {"bench", config_text("{model: 8}", "{}"), 0, {}, {}});
    std::vector<double> save_seconds;
    int64_t peak_extra_bytes = 0;
    run_spmd(saved.mesh, [&](DeviceContext& device) {
      nn::Parameters params = saved.built.model->initialize(device.rank);
      std::unique_ptr<optim::Optimizer> optimizer = optim::make_adam({});
      optimizer->build(params);
      for (auto& [slot_name, slot] : optimizer->slots()) {
        const DTensor& variable = params.at(slot_name.substr(0, slot_name.rfind('/'))).value();
        DTensor source = redistribute(variable, slot->layout());
        for (int64_t i = 0; i < source.local().size(); ++i)
          slot->local()[i] = slot_value(source.local()[i], slot_name.ends_with("/m") ? 0 : 1);
      }
      train::Position position;
      train::RankState state{device.rank, params, *optimizer, position};
      const Group everyone = device.group(device.mesh->dim_names());
      for (int repeat = 0; repeat < 3; ++repeat) {
        position.step = repeat + 1;
        device.comm->barrier(everyone);
        int64_t rss_before_kib = 0;
        if (device.rank == 0) {
          std::ofstream("/proc/self/clear_refs") << "5";  // resets the peak RSS to the current RSS
          rss_before_kib = status_kib("VmRSS");
        }
        device.comm->barrier(everyone);
        const auto start = Clock::now();
        manager.save(state, false);
        if (device.rank == 0) {
          save_seconds.push_back(seconds_since(start));
          peak_extra_bytes = std::max(peak_extra_bytes, (status_kib("VmHWM") - rss_before_kib) * 1024);
        }
      }
    });
    const double save_s = median(save_seconds);
    fmt::print("{{\"name\": \"{} save, mesh {{model: 8}}\", \"seconds\": {:.3f}, \"bytes_per_s\": {:.0f}, "
               "\"peer_dd_fdatasync_write_bytes_per_s\": {:.0f}, \"ratio\": {:.3f}, \"peak_extra_rss_bytes\": {}, "
               "\"largest_shard_bytes\": {}, \"largest_shard_file_bytes\": {}, \"peak_extra_budget_bytes\": {}}}\n",
               name, save_s, double(state_bytes) / save_s, peer_write_bps, double(state_bytes) / save_s / peer_write_bps,
               peak_extra_bytes, largest_shard_bytes, largest_file_bytes, largest_file_bytes + (64 << 20));
    std::fflush(stdout);

    // Restore, cold, onto the same mesh and onto another mesh with 2-D blocks that cut across the saved shards.
    Setup other = make_setup("{a: 2, b: 4}", "{dense1/kernel: [a, b], dense2/kernel: [b, a]}");
    std::vector<double> same_seconds, unverified_seconds, other_seconds, index_seconds, verify_cold, verify_cold_serial,
        verify_warm;
    int64_t wrong_same = 0, wrong_other = 0;
    for (int repeat = 0; repeat < 5; ++repeat) {
      int64_t wrong = 0;
      double index_s = 0;
      same_seconds.push_back(restore(saved, dir, &wrong, &index_s));
      index_seconds.push_back(index_s);
      wrong_same += wrong;
      unverified_seconds.push_back(restore(saved, dir, &wrong, nullptr, false));
      wrong_same += wrong;
      other_seconds.push_back(restore(other, dir, &wrong));
      wrong_other += wrong;
      verify_cold.push_back(verify_seconds(dir, true, true));
      verify_cold_serial.push_back(verify_seconds(dir, true, false));
      verify_warm.push_back(verify_seconds(dir, false, true));
    }
    const double same_s = median(same_seconds), other_s = median(other_seconds);
    fmt::print("{{\"name\": \"{} restore (cold cache), same mesh {{model: 8}}\", \"seconds\": {:.3f}, \"bytes_per_s\": {:.0f}, "
               "\"peer_dd_cold_read_bytes_per_s\": {:.0f}, \"ratio\": {:.3f}, \"read_index_seconds\": {:.3f}, "
               "\"without_checksum_pass_seconds\": {:.3f}, \"wrong_values\": {}}}\n",
               name, same_s, double(state_bytes) / same_s, peer_read_bps, double(state_bytes) / same_s / peer_read_bps,
               median(index_seconds), median(unverified_seconds), wrong_same);
    fmt::print("{{\"name\": \"{} restore (cold cache) onto mesh {{a: 2, b: 4}}, 2-D blocks\", \"seconds\": {:.3f}, "
               "\"bytes_per_s\": {:.0f}, \"peer_same_mesh_seconds\": {:.3f}, \"ratio\": {:.3f}, \"wrong_values\": {}}}\n",
               name, other_s, double(state_bytes) / other_s, same_s, other_s / same_s, wrong_other);
    fmt::print("{{\"name\": \"{} checksum pass alone (verify_files)\", \"cold_seconds\": {:.3f}, "
               "\"cold_one_thread_seconds\": {:.3f}, \"warm_seconds\": {:.3f}, \"cold_share_of_same_mesh_restore\": {:.3f}}}\n",
               name, median(verify_cold), median(verify_cold_serial), median(verify_warm), median(verify_cold) / same_s);
    fs::remove_all(scratch);
    return wrong_same + wrong_other == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_checkpoint: %s\n", error.what());
    fs::remove_all(scratch);
    return 1;
  }
}

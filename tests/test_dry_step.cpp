// The dry run (core/dry_run.hpp, engine/dry_step.hpp): the engine's own step with no arithmetic and no memory
// touched. It must take exactly the collectives of the real step (every shipped config, every rank), count the
// tensors the step holds, note each kernel's work, and stay small however large the config.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config_errors.hpp"
#include "engine/dry_step.hpp"
#include "engine/model_builder.hpp"
#include "engine/memory_plan.hpp"

namespace dtrain {
namespace {

std::filesystem::path source_dir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

// This process's resident memory now (VmRSS), in bytes.
double resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  return 0;
}

std::string describe(const CollectiveCall& call) {
  std::string ranks;
  for (int rank : call.ranks) ranks += std::to_string(rank) + ",";
  return call.kind + " [" + ranks + "] " + std::to_string(call.bytes) + " B";
}

// The dry step's collectives are the real step's, call by call, on every rank.
void check_same_collectives(const Config& config, MemoryUse use) {
  const DryStep dry = dry_step(config, use, true);
  const DryStep real = dry_step(config, use, false);
  REQUIRE(dry.collectives.size() == real.collectives.size());
  for (size_t rank = 0; rank < dry.collectives.size(); ++rank) {
    INFO("rank ", rank);
    const auto& a = dry.collectives[rank];
    const auto& b = real.collectives[rank];
    CHECK(a.size() == b.size());
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      INFO("call ", i);
      CHECK(describe(a[i]) == describe(b[i]));
    }
  }
  // Every device holds something, and its peak is at least what it holds at the end.
  REQUIRE(dry.tally.devices.size() == dry.collectives.size());
  for (const dry_run::DeviceTally& device : dry.tally.devices) {
    CHECK(device.peak_bytes > 0);
    CHECK(device.peak_bytes >= device.live_bytes);
    CHECK(!device.kernels.empty());
  }
}

}  // namespace

TEST_CASE("the dry step takes the real step's collectives on every shipped config") {
  const std::filesystem::path dir = source_dir() / "configs";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    INFO("config: ", entry.path().string());
    const Config config = load_config(entry.path().string(), testing::no_path_check());
    check_same_collectives(config, MemoryUse::train);
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("the dry step takes the real collectives with accumulation (also under train.bitwise), Adam, clipping and other meshes") {
  const std::string imdb = (source_dir() / "configs" / "imdb_dp.yaml").string();
  const std::string adam = (source_dir() / "configs" / "imdb_dp_adam.yaml").string();
  const std::string mnist = (source_dir() / "configs" / "mnist_mp.yaml").string();
  for (const auto& [file, overrides] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {imdb, {"train.accumulation_steps=2"}},
           {adam, {"train.clip.global_norm=1"}},
           {imdb, {"mesh.dims.batch=2"}},
           {mnist, {"train.accumulation_steps=2"}},
           {mnist, {"mesh.dims.batch=1"}},
           {mnist, {"train.bitwise=true", "train.accumulation_steps=2"}},
           {mnist, {"train.precision=bf16"}}}) {
    INFO(file, " ", overrides.size() > 0 ? overrides[0] : "");
    check_same_collectives(load_config(file, testing::no_path_check(overrides)), MemoryUse::train);
  }
  check_same_collectives(load_config(imdb, testing::no_path_check()), MemoryUse::eval);
}

TEST_CASE("a dry step notes each kernel's work and counts the step's tensors") {
  // One dense layer 1200 -> 2 on one device: the forward product is 32 x 1200 x 2.
  const std::string imdb = (source_dir() / "configs" / "imdb_dp.yaml").string();
  const Config config = load_config(
      imdb, testing::no_path_check({"mesh.dims.batch=1", "data.batch_size=32", "data.prefetch=0"}));
  const DryStep step = dry_step(config);
  REQUIRE(step.tally.devices.size() == 1);
  const dry_run::DeviceTally& device = step.tally.devices[0];
  double gemm_flops = 0;
  for (const kernels::KernelWork& work : device.kernels)
    if (std::string(work.family) == "gemm") gemm_flops += work.flops;
  CHECK(gemm_flops > 0);
  // Variables and their gradients at least, whatever else the step holds at its peak.
  const Engine engine = build_engine(config, train_options(config), std::nullopt);
  const MemoryPlan plan = memory_plan(config, *engine.built.model, engine.placement);
  CHECK(device.peak_bytes >= plan.variable_bytes + plan.gradient_bytes);
  CHECK(!(device.peak_bytes != device.peak_bytes));  // not NaN
}

TEST_CASE("a dry step of a config far larger than this machine touches no memory") {
  // dense1 of 1200 x 300000 on 8 devices: 1.34 GiB a device for the variable alone, 8 devices in this process.
  const std::string imdb = (source_dir() / "configs" / "imdb_dp.yaml").string();
  const Config config = load_config(imdb, testing::no_path_check({"model.0.dense=300000"}));
  const double before = resident_bytes();
  const DryStep step = dry_step(config);
  const double grown = resident_bytes() - before;
  REQUIRE(step.tally.devices.size() == 8);
  CHECK(step.tally.devices[0].peak_bytes > 2.0 * 1200 * 300000 * 4);  // the kernel and its gradient
  CHECK(grown < 100e6);
}

}  // namespace dtrain

// Sharded HDF5 checkpoints: saved on meshes {1}, {8}, {4,2}, {2,2,2} and restored onto each of the others,
// every variable and optimizer slot comes back bitwise equal (slots flat-sharded in the optimizer, padded
// chunks included, or whole, on either side); the index's virtual datasets read through
// h5dump give the same values; the commit protocol keeps `latest` and max_to_keep; each error is clear.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "core/checkpoint/hdf5.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/device.hpp"
#include "tests/checkpoint_fixture.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::testing;
namespace fs = std::filesystem;

namespace {

// The values h5dump prints for one dataset of a file, read from another working directory.
std::vector<double> h5dump_values(const std::string& file, const std::string& dataset) {
  const std::string command =
      fmt::format("cd / && h5dump -d '{}' -y -w 0 -m '%.9g' '{}' 2>&1", dataset, fs::absolute(file).string());
  std::FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string text;
  char buffer[4096];
  while (size_t got = std::fread(buffer, 1, sizeof(buffer), pipe)) text.append(buffer, got);
  ::pclose(pipe);
  const size_t data = text.find("DATA {");
  INFO(text.substr(0, 2000));
  REQUIRE(data != std::string::npos);
  std::vector<double> values;
  const char* cursor = text.c_str() + data + 6;
  while (*cursor && *cursor != '}') {
    char* end = nullptr;
    const double value = std::strtod(cursor, &end);
    if (end == cursor) {
      ++cursor;
      continue;
    }
    values.push_back(value);
    cursor = end;
  }
  return values;
}

}  // namespace

TEST_CASE("a checkpoint saved on any of {1}, {8}, {4,2}, {2,2,2} restores bitwise onto every other mesh") {
  // Slots flat-sharded (min 1) or whole (a threshold above every variable here) on either side: the
  // checkpoint holds them in their variables' layouts all the same.
  const int64_t whole = 1 << 30;
  for (auto [save_min, restore_min] : {std::pair<int64_t, int64_t>{1, 1}, {1, whole}, {whole, 1}}) {
  for (const MeshCase& saved : mesh_cases()) {
    TempDir dir("ckpt_reshard");
    save_on(saved, dir.str(), 3, 5, save_min);
    for (const MeshCase& restored : mesh_cases()) {
      CAPTURE(save_min);
      CAPTURE(restore_min);
      CAPTURE(saved.name);
      CAPTURE(restored.name);
      train::Position position;
      int64_t iterations = 0;
      std::map<std::string, Tensor> globals = restore_on(restored, dir.str(), &position, &iterations, restore_min);
      // 6 variables and m, v for the 5 trainable ones.
      CHECK(globals.size() == 6 + 2 * 5);
      for (auto& [name, value] : globals) {
        CAPTURE(name);
        CHECK(bitwise_equal(value, value_of(name, value.shape())));
      }
      CHECK(position.step == 5);
      CHECK(position.epoch == 1);
      CHECK(position.batch_in_epoch == 2);
      CHECK(iterations == 7);
    }
  }
  }
}

TEST_CASE("replicas write nothing twice: shard files and blocks follow the layouts") {
  TempDir dir("ckpt_files");
  save_on(mesh_cases()[2], dir.str());  // {4,2}
  checkpoint::CheckpointIndex index = checkpoint::read_index(checkpoint::find_checkpoint(dir.str()));
  CHECK(fs::path(index.folder).filename() == "ckpt-5");
  const checkpoint::TensorRecord* mean = index.find("variables/bn/moving_mean");  // [y] on {4,2}: ranks 0, 1 write
  REQUIRE(mean != nullptr);
  REQUIRE(mean->shards.size() == 2);
  CHECK(mean->shards[0].file == "shard-0-of-8.h5");
  CHECK(mean->shards[1].file == "shard-1-of-8.h5");
  CHECK(mean->shards[1].offset == Shape{12});
  CHECK(mean->shards[1].shape == Shape{12});
  const checkpoint::TensorRecord* kernel = index.find("variables/dense1/kernel");  // [y, x]: all 8 distinct
  REQUIRE(kernel != nullptr);
  CHECK(kernel->shards.size() == 8);
  CHECK(kernel->global_shape == Shape{16, 24});
  CHECK(kernel->layout == Layout({"y", "x"}, mesh_cases()[2].mesh).to_string());
  CHECK(index.meta.mesh == mesh_cases()[2].mesh->to_string());
  CHECK(index.meta.optimizer == "adam");
  CHECK(index.meta.shuffle_seed == 9);
  CHECK(index.meta.config == "mesh: {}\n");
  CHECK(index.meta.vocabulary == std::vector<std::string>{"[UNK]", "movie"});
  CHECK(index.meta.idf == std::vector<float>{1.5f, 2.25f});
  int64_t stored_floats = 0;
  for (const auto& tensor : index.tensors)
    for (const auto& shard : tensor.shards) stored_floats += num_elements(shard.shape);
  int64_t global_floats = 0;
  for (const auto& tensor : index.tensors) global_floats += num_elements(tensor.global_shape);
  CHECK(stored_floats == global_floats);  // each element once
}

TEST_CASE("h5dump reads every tensor through index.h5's virtual datasets, from another directory") {
  TempDir dir("ckpt_h5dump");
  save_on(mesh_cases()[3], dir.str());  // {2,2,2}
  const std::string index = dir.str() + "/ckpt-5/index.h5";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"variables/dense1/kernel", "dense1/kernel"}, {"variables/conv/kernel", "conv/kernel"},
      {"optimizer/dense2/kernel/v", "dense2/kernel"}};
  for (const auto& [name, variable] : cases) {
    CAPTURE(name);
    const Shape shape = shape_of(variable);
    const Tensor expected = value_of(name, shape);
    std::vector<double> values = h5dump_values(index, "/" + name);
    REQUIRE(int64_t(values.size()) == expected.size());
    for (int64_t i = 0; i < expected.size(); ++i) {
      if (float(values[i]) != expected[i]) {
        FAIL_CHECK("element " << i << ": " << values[i] << " vs " << expected[i]);
        break;
      }
    }
  }
}

TEST_CASE("commit protocol: latest names the newest, max_to_keep prunes the oldest, a failed save damages nothing") {
  TempDir dir("ckpt_commit");
  for (int64_t step : {1, 2, 3, 4}) save_on(mesh_cases()[1], dir.str(), 2, step);
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-3", "ckpt-4"});
  std::ifstream latest(dir.str() + "/latest");
  std::string name;
  latest >> name;
  CHECK(name == "ckpt-4");

  // A save that fails mid-way (a scalar cannot be saved: every rank throws while writing shards).
  const MeshCase mesh_case = mesh_cases()[1];
  checkpoint::CheckpointManager manager(dir.str(), 2, test_context());
  std::string message;
  CHECK(thrown([&] {
          run_spmd(mesh_case.mesh, [&](DeviceContext& device) {
            RankModel state = make_state(mesh_case, device.rank, true);
            state.params.add("odd/scalar", Var(DTensor({}, Layout::replicated(mesh_case.mesh, 0), Tensor({}, 1.0f))));
            state.position.step = 9;
            train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
            manager.save(rank_state, false);
          });
        }, &message) == "error");
  CHECK(message.find("scalar") != std::string::npos);
  CHECK(checkpoint::find_checkpoint(dir.str()) == dir.str() + "/ckpt-4");
  std::map<std::string, Tensor> globals = restore_on(mesh_cases()[0], dir.str());
  CHECK(bitwise_equal(globals.at("variables/dense1/kernel"), value_of("variables/dense1/kernel", {16, 24})));
  // The next good save clears the interrupted one's leftovers.
  save_on(mesh_cases()[1], dir.str(), 2, 10);
  CHECK(!fs::exists(dir.str() + "/ckpt-9.partial"));
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-4", "ckpt-10"});
}

TEST_CASE("checkpoint errors: missing or truncated shard, bad magic or version, model mismatch") {
  const MeshCase eight = mesh_cases()[1];
  std::string message;

  SUBCASE("no checkpoint in the folder") {
    TempDir dir("ckpt_none");
    CHECK(thrown([&] { checkpoint::find_checkpoint(dir.str()); }, &message) == "usage");
    CHECK(message.find("holds no checkpoint") != std::string::npos);
  }
  SUBCASE("missing shard file") {
    TempDir dir("ckpt_missing");
    save_on(eight, dir.str());
    fs::remove(dir.str() + "/ckpt-5/shard-3-of-8.h5");
    CHECK(thrown([&] { checkpoint::read_index(dir.str() + "/ckpt-5"); }, &message) == "error");
    CHECK(message.find("missing shard file") != std::string::npos);
    CHECK(message.find("shard-3-of-8.h5") != std::string::npos);
  }
  SUBCASE("truncated shard file") {
    TempDir dir("ckpt_truncated");
    save_on(eight, dir.str());
    const std::string shard = dir.str() + "/ckpt-5/shard-0-of-8.h5";
    fs::resize_file(shard, fs::file_size(shard) / 2);
    CHECK(thrown([&] { checkpoint::read_index(dir.str() + "/ckpt-5"); }, &message) == "error");
    CHECK(message.find("shard-0-of-8.h5") != std::string::npos);
    CHECK(message.find("truncated") != std::string::npos);
  }
  SUBCASE("wrong magic, wrong version") {
    TempDir dir("ckpt_magic");
    save_on(eight, dir.str());
    const std::string index = dir.str() + "/ckpt-5/index.h5";
    auto rewrite = [&](const std::string& attribute, auto value) {
      auto held = checkpoint::h5::lock();
      checkpoint::h5::Handle file(H5Fopen(index.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
      REQUIRE(file.get() >= 0);
      H5Adelete(file, attribute.c_str());
      checkpoint::h5::write_attribute(file, attribute, value);
      file.reset();
      // Changed on purpose: a manifest to match, so that what the file says is what is checked.
      checkpoint::Manifest manifest = checkpoint::read_manifest(dir.str() + "/ckpt-5");
      for (auto& digest : manifest.files) digest = checkpoint::digest_of_file(dir.str() + "/ckpt-5", digest.file);
      checkpoint::write_manifest(dir.str() + "/ckpt-5", manifest);
    };
    rewrite("format_version", int64_t(99));
    CHECK(thrown([&] { checkpoint::read_index(dir.str() + "/ckpt-5"); }, &message) == "usage");
    CHECK(message.find("format version 99") != std::string::npos);
    rewrite("magic", std::string("something-else"));
    CHECK(thrown([&] { checkpoint::read_index(dir.str() + "/ckpt-5"); }, &message) == "usage");
    CHECK(message.find("not a dtrain checkpoint") != std::string::npos);
  }
  SUBCASE("a variable missing, an extra one, another global shape, another optimizer") {
    TempDir dir("ckpt_mismatch");
    save_on(eight, dir.str());
    checkpoint::CheckpointIndex index = checkpoint::read_index(dir.str() + "/ckpt-5");
    auto restore_with = [&](std::vector<VariableDef> defs, bool adam = true) {
      return thrown([&] {
        run_spmd(eight.mesh, [&](DeviceContext& device) {
          RankModel state = make_state(eight, device.rank, false, defs);
          if (!adam) {
            state.optimizer = optim::make_sgd(0.1f);
            state.optimizer->build(state.params);
          }
          train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
          checkpoint::restore(index, rank_state, true);
        });
      }, &message);
    };
    std::vector<VariableDef> extra = kVariables;
    extra.push_back({"dense3/kernel", {8, 2}, true});
    CHECK(restore_with(extra) == "usage");
    CHECK(message.find("'variables/dense3/kernel'") != std::string::npos);
    std::vector<VariableDef> fewer(kVariables.begin(), kVariables.end() - 1);
    CHECK(restore_with(fewer) == "usage");
    CHECK(message.find("conv/kernel") != std::string::npos);
    std::vector<VariableDef> wider = kVariables;
    wider[0].shape = {16, 32};
    CHECK(restore_with(wider) == "usage");
    CHECK(message.find("(16,24)") != std::string::npos);
    CHECK(restore_with(kVariables, false) == "usage");
    CHECK(message.find("adam") != std::string::npos);
    CHECK(restore_with(kVariables) == "none");
  }
}

// Who may touch a checkpoint dir and what a run deletes there: one writer (flock), readers' leases that
// defer deletions, deletions through a hidden name, other runs' checkpoints replaced only after the first
// new one is committed, and saves that refuse NaN and leave nothing partial behind.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/checkpoint/dir_lock.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/error.hpp"
#include "tests/checkpoint_fixture.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::testing;
namespace fs = std::filesystem;

namespace {

// One save through `manager` of the fixture's state at `step` on {8}; `poison` puts a NaN into one rank's
// dense2/kernel first.
void save_step(checkpoint::CheckpointManager& manager, int64_t step, bool poison = false) {
  const MeshCase mesh_case = mesh_cases()[1];
  run_spmd(mesh_case.mesh, [&](DeviceContext& device) {
    RankModel state = make_state(mesh_case, device.rank, true);
    state.position.step = step;
    if (poison && device.rank == 3) state.params.at("dense2/kernel").value().local().data()[0] = std::nanf("");
    train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
    manager.save(rank_state, false);
  });
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("one writer per checkpoint dir: a second is refused naming the holder's PID and host, until it is gone") {
  TempDir dir("ckpt_lock");
  const std::string path = (dir / "runs/ckpt").string();
  std::string message;
  {
    checkpoint::WriterLock first(path);  // creates the dir
    CHECK(first.held());
    CHECK(thrown([&] { checkpoint::WriterLock second(path); }, &message) == "usage");
    CHECK(message.find("in use by another dtrain run (PID " + std::to_string(::getpid()) + " on host ") !=
          std::string::npos);
  }
  checkpoint::WriterLock again(path);
  CHECK(again.held());
  CHECK(!checkpoint::is_nonempty_dir(path));  // the lock files alone do not make it "not empty"

  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  CHECK(thrown([&] { checkpoint::WriterLock blocked(file + "/ckpt"); }, &message) == "usage");
  CHECK(message.find("cannot create checkpoint dir") != std::string::npos);
}

TEST_CASE("a reader's lease defers deletions; the next save or finish() makes them") {
  TempDir dir("ckpt_lease");
  checkpoint::CheckpointManager manager(dir.str(), 1, test_context("run-a"));
  save_step(manager, 1);
  {
    checkpoint::OpenedCheckpoint reading = checkpoint::open_checkpoint(dir.str());
    CHECK(reading.index.meta.step == 1);
    save_step(manager, 2);
    save_step(manager, 3);
    // What the reader opened is whole; nothing was deleted while it read.
    CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-1", "ckpt-2", "ckpt-3"});
    std::map<std::string, Tensor> globals = restore_on(mesh_cases()[0], dir.str() + "/ckpt-1");
    CHECK(bitwise_equal(globals.at("variables/dense1/kernel"), value_of("variables/dense1/kernel", {16, 24})));
  }
  manager.finish();
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-3"});
  CHECK(checkpoint::find_checkpoint(dir.str()) == dir.str() + "/ckpt-3");
}

TEST_CASE("deletions go through a hidden name; leftovers of a killed deletion or save are cleared by the next save") {
  TempDir dir("ckpt_leftovers");
  checkpoint::CheckpointManager manager(dir.str(), 2, test_context("run-a"));
  save_step(manager, 1);
  // What a kill leaves: a checkpoint renamed for deletion, half deleted; a save's partial folder.
  fs::create_directories(dir / ".deleting-ckpt-0/sub");
  fs::create_directories(dir / "ckpt-7.partial");
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-1"});
  save_step(manager, 2);
  save_step(manager, 3);
  CHECK(entries(dir.str()) == std::vector<std::string>{".readers", "ckpt-2", "ckpt-3", "latest"});
}

TEST_CASE("replacing other runs' checkpoints waits for this run's first commit; a run never prunes another's") {
  TempDir dir("ckpt_replace");
  {
    checkpoint::CheckpointManager old_run(dir.str(), 3, test_context("run-a"));
    for (int64_t step : {4, 8, 12}) save_step(old_run, step);
  }
  // A replacing run whose first save fails (NaN): every old checkpoint is still there, latest unchanged.
  checkpoint::CheckpointManager failing(dir.str(), 3, test_context("run-b"), true);
  std::string message;
  CHECK(thrown([&] { save_step(failing, 1, true); }, &message) == "error");
  CHECK(message.find("not saving step 1: 'variables/dense2/kernel' holds NaN") != std::string::npos);
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-4", "ckpt-8", "ckpt-12"});
  CHECK(checkpoint::find_checkpoint(dir.str()) == dir.str() + "/ckpt-12");
  CHECK(!fs::exists(dir / "ckpt-1.partial"));

  // A run that does not replace keeps its hands off run-a's checkpoints when it prunes its own.
  {
    TempDir other("ckpt_replace_other");
    fs::copy(dir.path, other.path, fs::copy_options::recursive);
    checkpoint::CheckpointManager keeping(other.str(), 1, test_context("run-c"));
    save_step(keeping, 1);
    save_step(keeping, 2);
    CHECK(checkpoint::list_checkpoints(other.str()) == std::vector<std::string>{"ckpt-2", "ckpt-4", "ckpt-8", "ckpt-12"});
  }

  // The first committed save of the replacing run takes the old ones away, the same step number included.
  checkpoint::CheckpointManager replacing(dir.str(), 3, test_context("run-b"), true);
  save_step(replacing, 8);
  CHECK(checkpoint::list_checkpoints(dir.str()) == std::vector<std::string>{"ckpt-8"});
  CHECK(checkpoint::run_id_of(dir.str() + "/ckpt-8") == "run-b");
  CHECK(checkpoint::find_checkpoint(dir.str()) == dir.str() + "/ckpt-8");
  CHECK(replacing.last_committed() == dir.str() + "/ckpt-8");
}

TEST_CASE("a checkpoint dir's odd entries: huge step numbers and files named like checkpoints are not checkpoints") {
  TempDir dir("ckpt_odd");
  fs::create_directories(dir / "ckpt-99999999999999999999999");
  std::ofstream(dir / "ckpt-5") << "a file";
  CHECK(checkpoint::list_checkpoints(dir.str()).empty());
  CHECK(checkpoint::run_id_of(dir.str() + "/ckpt-5").empty());
}

// `dtrain diff`'s comparison (engine/checkpoint_diff, engine/metrics_diff): checkpoints written by the real
// writer on different meshes compare identical; one float moved by one ULP is found, named and located
// whatever block size the comparison streams with; names on one side only, other shapes and another
// step are named; the ULP distance is sign-aware; NaNs count identical only with the same bits.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "engine/checkpoint_diff.hpp"
#include "engine/metrics_diff.hpp"
#include "tests/checkpoint_fixture.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

// Saves the fixture's state on `mesh_case`, with `edit` applied to each variable's global value first.
void save_edited(const MeshCase& mesh_case, const std::string& dir, int64_t step,
                 const std::function<void(const std::string&, Tensor&)>& edit,
                 const std::vector<VariableDef>& defs = kVariables) {
  checkpoint::CheckpointManager manager(dir, 3, test_context());
  run_spmd(mesh_case.mesh, [&](DeviceContext& device) {
    RankModel state = make_state(mesh_case, device.rank, true, defs);
    for (const auto& def : defs) {
      Tensor global = value_of("variables/" + def.path, def.shape).clone();
      edit(def.path, global);
      DTensor& value = state.params.at(def.path).value();
      value.local() = pack(global, value.layout(), device.rank);
    }
    state.position.step = step;
    train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
    manager.save(rank_state, false);
  });
}

void no_edit(const std::string&, Tensor&) {}

checkpoint::CheckpointIndex index_of(const std::string& dir) {
  return checkpoint::read_index(checkpoint::find_checkpoint(dir));
}

const TensorDiff& entry(const CheckpointDiff& diff, const std::string& name) {
  for (const auto& tensor : diff.tensors)
    if (tensor.name == name) return tensor;
  FAIL("no entry " << name);
  return diff.tensors.front();
}

}  // namespace

TEST_CASE("ulp_distance counts representable floats between two values, across zero too") {
  CHECK(ulp_distance(1.0f, 1.0f) == 0);
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance(std::nextafter(1.0f, 2.0f), 1.0f) == 1);
  CHECK(ulp_distance(1.0f, 2.0f) == (uint64_t(1) << 23));  // one binade
  CHECK(ulp_distance(-1.0f, -2.0f) == (uint64_t(1) << 23));
  CHECK(ulp_distance(0.0f, -0.0f) == 0);
  const float tiny = std::numeric_limits<float>::denorm_min();
  CHECK(ulp_distance(tiny, -tiny) == 2);  // -tiny, 0, tiny
  CHECK(ulp_distance(-1.0f, 1.0f) == 2 * uint64_t(0x3f800000));
  CHECK(ulp_distance(std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()) == 1);
}

TEST_CASE("compare_values: bitwise-equal NaNs are identical, NaN vs a number differs, -0 vs +0 differs") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, nan, 0.0f, 2.0f};
  const float b[] = {nan, 1.0f, 3.0f, -0.0f, std::nextafter(2.0f, 0.0f)};
  TensorDiff diff;
  compare_values(a, b, 5, 10, diff);
  CHECK(diff.differing == 3);
  CHECK(diff.nan_mismatch == 1);
  CHECK(diff.max_ulp == 1);
  CHECK(diff.max_ulp_at == 14);
  CHECK(diff.max_abs == doctest::Approx(2.0 - double(std::nextafter(2.0f, 0.0f))));
  TensorDiff same;
  compare_values(a, a, 5, 0, same);
  CHECK(same.differing == 0);
}

TEST_CASE("checkpoints of the same values written on {8} and {4,2} compare identical") {
  const auto meshes = mesh_cases();
  TempDir dir_a("diff_a"), dir_b("diff_b");
  save_edited(meshes[1], dir_a.str(), 5, no_edit);
  save_edited(meshes[2], dir_b.str(), 5, no_edit);
  const auto a = index_of(dir_a.str()), b = index_of(dir_b.str());
  const CheckpointDiff diff = diff_checkpoints(a, b);
  INFO(diff_report(diff));
  CHECK(diff.identical());
  CHECK(diff.state_differences.empty());
  REQUIRE(diff.tensors.size() == a.tensors.size());
  for (const auto& tensor : diff.tensors) CHECK(tensor.kind == TensorDiff::Kind::identical);
  CHECK(diff.notes.size() >= 1);  // the meshes differ, which is no difference in the values
  CHECK(diff_report(diff).find("verdict: identical") != std::string::npos);
}

TEST_CASE("one float moved by one ULP is named with ULP 1 and its index, whatever the block size") {
  const auto meshes = mesh_cases();
  TempDir dir_a("diff_ulp_a"), dir_b("diff_ulp_b");
  // conv/kernel is (8,4,6): element [5][2][3], sharded differently on {1} and {2,2,2}.
  const int64_t moved = (5 * 4 + 2) * 6 + 3;
  save_edited(meshes[0], dir_a.str(), 5, no_edit);
  save_edited(meshes[3], dir_b.str(), 5, [&](const std::string& path, Tensor& global) {
    if (path == "conv/kernel") global.data()[moved] = std::nextafter(global.data()[moved], 1e9f);
  });
  const auto a = index_of(dir_a.str()), b = index_of(dir_b.str());
  // Blocks of 1 value, part of a row, whole rows, several rows, and the whole tensor at once.
  for (int64_t block : {int64_t(1), int64_t(5), int64_t(6), int64_t(24), int64_t(50), int64_t(1) << 20}) {
    CAPTURE(block);
    const CheckpointDiff diff = diff_checkpoints(a, b, block);
    CHECK_FALSE(diff.identical());
    CHECK(diff.state_differences.empty());
    for (const auto& tensor : diff.tensors) {
      CAPTURE(tensor.name);
      if (tensor.name != "variables/conv/kernel") CHECK(tensor.kind == TensorDiff::Kind::identical);
    }
    const TensorDiff& conv = entry(diff, "variables/conv/kernel");
    CHECK(conv.kind == TensorDiff::Kind::differs);
    CHECK(conv.differing == 1);
    CHECK(conv.max_ulp == 1);
    CHECK(conv.max_ulp_at == moved);
    CHECK(conv.max_abs > 0);
    CHECK(conv.max_relative < 1e-6);
    const std::string report = diff_report(diff);
    CHECK(report.find("differs       variables/conv/kernel (8,4,6): 1 of 192 values") != std::string::npos);
    CHECK(report.find("max ULP 1 (at index " + std::to_string(moved) + ")") != std::string::npos);
  }
}

TEST_CASE("names on one side only, other shapes and another step are each named") {
  const auto meshes = mesh_cases();
  TempDir dir_a("diff_names_a"), dir_b("diff_names_b");
  std::vector<VariableDef> defs_b = kVariables;
  defs_b.erase(defs_b.begin() + 1);                  // dense1/bias only in A
  defs_b.push_back({"extra/kernel", {3, 3}, true});  // only in B
  for (auto& def : defs_b)
    if (def.path == "odd/kernel") def.shape = {5, 7};
  save_edited(meshes[0], dir_a.str(), 5, no_edit);
  save_edited(meshes[0], dir_b.str(), 6, no_edit, defs_b);
  const CheckpointDiff diff = diff_checkpoints(index_of(dir_a.str()), index_of(dir_b.str()));
  const std::string report = diff_report(diff);
  INFO(report);
  CHECK_FALSE(diff.identical());
  CHECK(entry(diff, "variables/dense1/bias").kind == TensorDiff::Kind::only_in_a);
  CHECK(entry(diff, "optimizer/dense1/bias/m").kind == TensorDiff::Kind::only_in_a);
  CHECK(entry(diff, "variables/extra/kernel").kind == TensorDiff::Kind::only_in_b);
  CHECK(entry(diff, "variables/odd/kernel").kind == TensorDiff::Kind::shape_mismatch);
  CHECK(entry(diff, "variables/dense1/kernel").kind == TensorDiff::Kind::identical);
  REQUIRE(!diff.state_differences.empty());
  CHECK(diff.state_differences.front() == "step: 5 vs 6");
  CHECK(report.find("shapes differ variables/odd/kernel: (7,5) in A, (5,7) in B") != std::string::npos);
  CHECK(report.find("only in B     variables/extra/kernel (3,3)") != std::string::npos);
}

TEST_CASE("a damaged shard file stops the comparison with the checksum error naming it") {
  const auto meshes = mesh_cases();
  TempDir dir("diff_damaged");
  save_edited(meshes[1], dir.str(), 5, no_edit);
  const std::string folder = checkpoint::find_checkpoint(dir.str());
  const std::string shard = folder + "/" + checkpoint::shard_file_name(0, 8);
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(std::streamoff(std::filesystem::file_size(shard) / 2));
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(std::streamoff(std::filesystem::file_size(shard) / 2));
    byte = char(byte ^ 0x5a);
    file.write(&byte, 1);
  }
  try {
    (void)index_of(dir.str());
    FAIL("a damaged checkpoint was read");
  } catch (const UsageError& error) {
    FAIL("a usage error: " << error.what());
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find("shard-0-of-8.h5") != std::string::npos);
    CHECK(message.find("checksum") != std::string::npos);
  }
}

TEST_CASE("diff --metrics names the first step whose logged loss differs, or the steps only one run logged") {
  TempDir dir("diff_metrics");
  auto write = [&](const std::string& name, const std::vector<std::pair<int64_t, std::string>>& rows) {
    std::filesystem::create_directories(dir / name);
    std::ofstream out(dir / name / "metrics.jsonl");
    out << R"({"split": "run", "event": "start", "run_id": "x", "mesh": "{batch: 1} on 1 CPU device"})" << "\n";
    for (const auto& [step, loss] : rows)
      out << fmt::format(R"({{"split": "train_steps", "epoch": 1, "step": {}, "steps": 1, "examples": 8, "loss": {}, )"
                         R"("accuracy": 0.5, "learning_rate": 0.1, "examples_per_s": 100, "seconds": 0.1}})",
                         step, loss)
          << "\n";
  };
  write("a", {{1, "2.30258512"}, {2, "2.1"}, {3, "1.90000002"}, {4, "null"}});
  write("b", {{1, "2.30258512"}, {2, "2.1"}, {3, "1.90000004"}, {4, "1.7"}});
  write("c", {{1, "2.30258512"}, {2, "2.1"}, {3, "1.90000002"}, {4, "null"}, {5, "1.5"}});
  const StepLosses a = read_step_losses((dir / "a").string());
  const MetricsDiff ab = diff_metrics(a, read_step_losses((dir / "b" / "metrics.jsonl").string()));
  REQUIRE(ab.first_differing_step.has_value());
  CHECK(*ab.first_differing_step == 3);
  CHECK(ab.loss_a == "1.90000002");
  CHECK(ab.loss_b == "1.90000004");
  CHECK_FALSE(ab.identical());
  CHECK(metrics_diff_report(ab).find("first differing step: 3: loss 1.90000002 in A, 1.90000004 in B") !=
        std::string::npos);
  const MetricsDiff aa = diff_metrics(a, a);
  CHECK(aa.identical());
  CHECK(aa.common_steps == 4);
  const MetricsDiff ac = diff_metrics(a, read_step_losses((dir / "c").string()));
  CHECK_FALSE(ac.first_differing_step.has_value());
  CHECK(ac.only_b == 1);
  CHECK_FALSE(ac.identical());
  CHECK(metrics_diff_report(ac).find("losses identical over the 4 steps both logged") != std::string::npos);
  // Runs that logged no step (a failed run, say) compare as nothing, never as identical.
  write("empty", {});
  const StepLosses empty = read_step_losses((dir / "empty").string());
  const MetricsDiff none = diff_metrics(empty, empty);
  CHECK_FALSE(none.identical());
  CHECK(metrics_diff_report(none).find("verdict: nothing to compare") != std::string::npos);
  CHECK_THROWS_AS(read_step_losses((dir / "missing").string()), UsageError);
}

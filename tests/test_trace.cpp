// The step timeline (train.profile, core/profile/trace.hpp): a real training run with profiling on writes a
// Chrome trace whose events are well formed and lie in the profiled steps, with one track per device, kernel
// events that name kernels, and exactly the collectives that counting communicators record on the same steps
// (kind, group, bytes, crossing processes, in order per device).
#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/comm/counting.hpp"
#include "core/device.hpp"
#include "core/profile/trace.hpp"
#include "tests/temp_folder.hpp"
#include "tests/training_fixture.hpp"

namespace dtrain {
namespace {

using testing::config_path;

struct Collective {
  std::string kind;
  std::vector<int> group;
  int64_t bytes;
  bool crossed;
  std::string str() const {
    std::string ranks;
    for (int rank : group) ranks += std::to_string(rank) + ",";
    return fmt::format("{} [{}] {} B{}", kind, ranks, bytes, crossed ? " crossed" : "");
  }
};

struct ProfiledRun {
  bool written = false;  // the trace file
  YAML::Node trace;
  std::vector<std::vector<Collective>> counted;  // per rank: the counting communicator's calls in steps S..S+K-1
  int devices = 0;
  std::vector<double> losses;  // every step's
};

// Trains `file` with `overrides` for `steps` steps, tracing steps [start, start + count), every rank's collectives
// also counted (a counting communicator installed at the start, as dry_step does); a save at step `start`.
ProfiledRun profiled_run(const std::string& file, std::vector<std::string> overrides, const data::Dataset& data,
                         int64_t steps, int64_t start, int64_t count, bool profiled = true) {
  testing::TempFolder folder("trace");
  overrides.push_back("train.max_steps=" + std::to_string(steps));
  const Config config = load_config(config_path(file), LoadOptions{overrides, "", false, "", {}});
  MeshPtr mesh = build_mesh(config);
  BuiltModel built = build_model(config, mesh, data.example_shape());
  train::TrainOptions options = train_options(config);
  const std::string trace_path = (folder / "process-0.trace.json").string();
  if (profiled) options.profile = {start, count, trace_path};
  train::Trainer trainer(*built.model, mesh, input_specs(config), options);

  ProfiledRun run;
  run.devices = mesh->size();
  std::vector<std::unique_ptr<CountingCommunicator>> counters(size_t(mesh->size()));
  // Per rank: how many calls its counter had when each step's collectives were over (want_save is asked after
  // them, on every rank, at every step; this run has no validation, test split or save collectives).
  std::vector<std::map<int64_t, size_t>> calls_after(size_t(mesh->size()));
  train::Hooks hooks;
  hooks.on_start = [&](train::RankState& state) {
    DeviceContext& device = current_device();
    counters[size_t(state.rank)] = std::make_unique<CountingCommunicator>(*device.comm);
    device.comm = counters[size_t(state.rank)].get();
  };
  hooks.want_save = [&](const train::Position& position, bool) {
    const int rank = current_device().rank;
    calls_after[size_t(rank)][position.step] = counters[size_t(rank)]->calls().size();
    return position.step == start;
  };
  hooks.save = [](train::RankState&, bool) {};  // a checkpoint save's event, with no collectives
  testing::QuietReporter quiet;
  DatasetSource source(data, true, config.data.shuffle.seed);
  run.losses = trainer.train(source, nullptr, quiet, hooks).step_losses;
  CHECK(!profile::recording());  // off again once the run is over

  for (int rank = 0; rank < mesh->size(); ++rank) {
    const auto& marks = calls_after[size_t(rank)];
    const std::vector<CollectiveCall>& calls = counters[size_t(rank)]->calls();
    std::vector<Collective> counted;
    // The window's last step, or the run's when it ended inside the window.
    const auto first = marks.find(start - 1), last = marks.find(std::min(start + count, steps + 1) - 1);
    if (last != marks.end()) {
      const size_t from = first == marks.end() ? 0 : first->second;
      REQUIRE((start == 1 || first != marks.end()));
      for (size_t i = from; i < last->second; ++i)
        counted.push_back({calls[i].kind, calls[i].ranks, int64_t(calls[i].bytes), false});  // one process
    }
    run.counted.push_back(std::move(counted));
  }
  run.written = std::filesystem::exists(trace_path);
  if (run.written) {
    std::ifstream in(trace_path);
    std::stringstream text;
    text << in.rdbuf();
    run.trace = YAML::Load(text.str());  // JSON is YAML's flow syntax
  }
  return run;
}

const std::set<std::string> kFamilies{"activations", "attention", "batch_norm", "clip",       "conv",
                                      "copy",        "dropout",   "elementwise", "embedding", "gemm",
                                      "layer_norm",  "metrics",   "pool",        "rows",      "updates"};

// Checks the trace of a run that traced steps [start, start + count) on `devices` devices.
void check_trace(const ProfiledRun& run, int64_t start, int64_t count) {
  REQUIRE(run.written);
  REQUIRE(run.trace.IsMap());
  const YAML::Node events = run.trace["traceEvents"];
  REQUIRE(events.IsSequence());
  std::map<int, std::string> thread_names;
  struct Span {
    std::string category, name;
    double ts, dur;
    int64_t step;
    YAML::Node args;
  };
  std::map<int, std::vector<Span>> tracks;  // by tid, in file order
  for (const YAML::Node& event : events) {
    const std::string phase = event["ph"].as<std::string>();
    CHECK(event["pid"].as<int>() == 0);
    if (phase == "M") {
      if (event["name"].as<std::string>() == "thread_name")
        thread_names[event["tid"].as<int>()] = event["args"]["name"].as<std::string>();
      continue;
    }
    REQUIRE(phase == "X");
    const double ts = event["ts"].as<double>(), dur = event["dur"].as<double>();
    CHECK(ts >= 0);   // NaN fails
    CHECK(dur >= 0);
    const int64_t step = event["args"]["step"].as<int64_t>();
    CHECK(step >= start);
    CHECK(step < start + count);
    tracks[event["tid"].as<int>()].push_back(
        {event["cat"].as<std::string>(), event["name"].as<std::string>(), ts, dur, step, event["args"]});
  }
  // The host track (tid 0) and one track per device (tid rank + 1), each with every profiled step once.
  REQUIRE(int(thread_names.size()) == run.devices + 1);
  CHECK(thread_names[0] == "host (steps)");
  REQUIRE(int(tracks.size()) == run.devices + 1);
  for (auto& [tid, spans] : tracks) {
    INFO("track ", tid, ": ", thread_names[tid]);
    if (tid > 0) CHECK(thread_names[tid] == fmt::format("device {} (cpu)", tid - 1));
    std::vector<int64_t> steps;
    std::map<int64_t, const Span*> step_span;
    for (const Span& span : spans) {
      if (span.category != "step") continue;
      CHECK(span.name == fmt::format("step {}", span.step));
      steps.push_back(span.step);
      step_span[span.step] = &span;
    }
    std::vector<int64_t> expected;
    for (int64_t s = start; s < start + count; ++s) expected.push_back(s);
    CHECK(steps == expected);
    if (tid == 0) {
      CHECK(spans.size() == size_t(count));  // the host track holds the steps alone
      continue;
    }
    // Everything on a device track lies inside its step; every kernel event names a kernel of a family.
    int kernels = 0, saves = 0;
    std::vector<Collective> traced;
    for (const Span& span : spans) {
      if (span.category == "step") continue;
      REQUIRE(step_span.count(span.step) == 1);
      const Span& step = *step_span[span.step];
      CHECK(span.ts >= step.ts);
      CHECK(span.ts + span.dur <= step.ts + step.dur + 0.002);  // the microseconds are rounded to the nanosecond
      if (span.category == "kernel") {
        ++kernels;
        const std::string family = span.args["family"].as<std::string>(), kernel = span.args["kernel"].as<std::string>();
        CHECK(kFamilies.count(family) == 1);
        CHECK(!kernel.empty());
        CHECK(span.name == family + "/" + kernel);
      } else if (span.category == "collective") {
        traced.push_back({span.args["kind"].as<std::string>(), span.args["group"].as<std::vector<int>>(),
                          span.args["bytes"].as<int64_t>(), span.args["crossed_processes"].as<bool>()});
      } else if (span.category == "checkpoint") {
        saves += span.name == "checkpoint save" && span.step == start;
      } else {
        CHECK(span.category == "data");
      }
    }
    CHECK(kernels > 0);
    CHECK(saves == 1);
    // The collectives are the counting communicator's on the same steps, call by call.
    const std::vector<Collective>& counted = run.counted[size_t(tid - 1)];
    CHECK(!counted.empty());
    CHECK(traced.size() == counted.size());
    for (size_t i = 0; i < std::min(traced.size(), counted.size()); ++i) {
      INFO("collective ", i);
      CHECK(traced[i].str() == counted[i].str());
    }
  }
}

}  // namespace

TEST_CASE("a profiled run's trace holds its steps' kernels and exactly the counted collectives") {
  const data::Dataset reviews = testing::generated(64 * 8, 1200, 2, true);
  const data::Dataset images = testing::generated(128 * 5, 784, 10, false);
  SUBCASE("imdb_sp {batch: 2, feature: 2, model: 2}") {
    const ProfiledRun run = profiled_run("imdb_sp.yaml", {}, reviews, 6, 2, 3);
    check_trace(run, 2, 3);
  }
  SUBCASE("imdb_mp with the batches read ahead, from the first step; the losses of a run without profiling") {
    const ProfiledRun run = profiled_run("imdb_mp.yaml", {"data.prefetch=2"}, reviews, 4, 1, 2);
    check_trace(run, 1, 2);
    const ProfiledRun plain = profiled_run("imdb_mp.yaml", {"data.prefetch=2"}, reviews, 4, 1, 2, false);
    CHECK(!plain.written);
    REQUIRE(run.losses.size() == 4);
    CHECK(run.losses == plain.losses);  // bit for bit: the timed kernels and the tracing communicator only watch
  }
  SUBCASE("mnist_mp {batch: 4, model: 2}, the window at the run's last step") {
    const ProfiledRun run = profiled_run("mnist_mp.yaml", {"data.image_shape=flat", "data.layout=[batch, unsharded]"},
                                        images, 5, 5, 1);
    check_trace(run, 5, 1);
  }
}

TEST_CASE("a run that ends inside the window writes the steps it ran; one that ends before it writes nothing") {
  const data::Dataset reviews = testing::generated(64 * 8, 1200, 2, true);
  const ProfiledRun short_window = profiled_run("imdb_dp.yaml", {}, reviews, 3, 2, 2);
  check_trace(short_window, 2, 2);  // the window ends at the run's last step
  const ProfiledRun ended_inside = profiled_run("imdb_dp.yaml", {}, reviews, 3, 3, 4);
  REQUIRE(ended_inside.written);
  check_trace(ended_inside, 3, 1);
  const ProfiledRun before = profiled_run("imdb_dp.yaml", {}, reviews, 3, 4, 2);
  CHECK(!before.written);
  CHECK(!profile::recording());
}

}  // namespace dtrain

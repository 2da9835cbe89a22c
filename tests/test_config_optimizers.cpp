// The optimizer and learning-rate schedule config (issue 17): Keras' defaults, the values written, dump_config
// round trips, and errors at FILE:LINE:COL with a suggestion.
#include <doctest/doctest.h>

#include "app/config.hpp"
#include "engine/model_builder.hpp"
#include "tests/config_errors.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::string kBase = R"(mesh:
  dims: {batch: 2}
data:
  dataset: mnist
  path: data/mnist
  batch_size: 8
model:
  - {dense: 10}
train:
  epochs: 1
  optimizer: OPTIMIZER
)";

std::string with(const std::string& optimizer) { return replace(kBase, "OPTIMIZER", optimizer); }

Config parsed(const std::string& optimizer) { return parse_config(with(optimizer), "t.yaml", no_path_check()); }

// dump_config reads back to the same optimizer config.
void check_round_trip(const Config& config) {
  const Config again = parse_config(dump_config(config), "dump.yaml", no_path_check());
  const OptimizerConfig &a = config.train.optimizer, &b = again.train.optimizer;
  CHECK(a.kind == b.kind);
  CHECK(a.learning_rate == b.learning_rate);
  CHECK(a.momentum == b.momentum);
  CHECK(a.nesterov == b.nesterov);
  CHECK(a.weight_decay == b.weight_decay);
  CHECK(a.beta_1 == b.beta_1);
  CHECK(a.beta_2 == b.beta_2);
  CHECK(a.epsilon == b.epsilon);
  const optim::LearningRateSchedule &s = a.schedule, &t = b.schedule;
  CHECK(s.kind == t.kind);
  CHECK(s.learning_rate == t.learning_rate);
  CHECK(s.warmup_steps == t.warmup_steps);
  CHECK(s.decay_steps == t.decay_steps);
  CHECK(s.alpha == t.alpha);
  CHECK(s.end_learning_rate == t.end_learning_rate);
  CHECK(s.decay_rate == t.decay_rate);
  CHECK(s.staircase == t.staircase);
  CHECK(s.boundaries == t.boundaries);
  CHECK(s.values == t.values);
  CHECK(dump_config(again) == dump_config(config));
}

}  // namespace

TEST_CASE("optimizers: Keras' defaults, the values written, and round trips") {
  Config sgd = parsed("sgd");
  CHECK(sgd.train.optimizer.kind == OptimizerKind::sgd);
  CHECK(sgd.train.optimizer.momentum == 0.0);
  CHECK(!sgd.train.optimizer.nesterov);
  CHECK(sgd.train.optimizer.weight_decay == 0.0);
  CHECK(sgd.train.optimizer.schedule.kind == optim::ScheduleKind::constant);
  CHECK(sgd.train.optimizer.schedule.learning_rate == 0.01);
  CHECK(make_optimizer(sgd.train.optimizer)->name() == "sgd");
  check_round_trip(sgd);

  Config momentum = parsed("{sgd: {learning_rate: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.001}}");
  CHECK(momentum.train.optimizer.momentum == 0.9);
  CHECK(momentum.train.optimizer.nesterov);
  CHECK(momentum.train.optimizer.weight_decay == 0.001);
  CHECK(make_optimizer(momentum.train.optimizer)->name() == "sgd_momentum");
  check_round_trip(momentum);

  Config adamw = parsed("adamw");
  CHECK(adamw.train.optimizer.kind == OptimizerKind::adamw);
  CHECK(adamw.train.optimizer.learning_rate == 0.001);
  CHECK(adamw.train.optimizer.weight_decay == 0.004);
  CHECK(make_optimizer(adamw.train.optimizer)->name() == "adamw");
  check_round_trip(adamw);
  Config adam = parsed("{adam: {weight_decay: 0.01, beta_1: 0.8}}");
  CHECK(adam.train.optimizer.weight_decay == 0.01);
  CHECK(make_optimizer(adam.train.optimizer)->name() == "adam");
  check_round_trip(adam);
}

TEST_CASE("schedules: each kind read, its defaults, and round trips") {
  Config cosine = parsed("{adamw: {learning_rate: 0.002, schedule: {cosine: {warmup_steps: 100, decay_steps: 1000}}}}");
  const optim::LearningRateSchedule& c = cosine.train.optimizer.schedule;
  CHECK(c.kind == optim::ScheduleKind::cosine);
  CHECK(c.learning_rate == 0.002);
  CHECK(c.warmup_steps == 100);
  CHECK(c.decay_steps == 1000);
  CHECK(c.alpha == 0.0);
  CHECK(make_optimizer(cosine.train.optimizer)->learning_rate_at(99) == doctest::Approx(0.002));
  CHECK(make_optimizer(cosine.train.optimizer)->learning_rate_at(1100) == doctest::Approx(0.0));
  check_round_trip(cosine);

  Config linear = parsed("{sgd: {schedule: {linear: {decay_steps: 10, end_learning_rate: 0.001}}}}");
  CHECK(linear.train.optimizer.schedule.kind == optim::ScheduleKind::linear);
  CHECK(linear.train.optimizer.schedule.end_learning_rate == 0.001);
  check_round_trip(linear);

  Config exponential =
      parsed("{sgd: {learning_rate: 0.1, schedule: {exponential: {decay_steps: 10, decay_rate: 0.9, staircase: true}}}}");
  CHECK(exponential.train.optimizer.schedule.decay_rate == 0.9);
  CHECK(exponential.train.optimizer.schedule.staircase);
  check_round_trip(exponential);

  Config step = parsed("{sgd: {schedule: {step: {boundaries: [100, 200], values: [0.1, 0.01, 0.001]}}}}");
  CHECK(step.train.optimizer.learning_rate == 0.1);  // values[0]
  CHECK(step.train.optimizer.schedule.boundaries == std::vector<std::int64_t>{100, 200});
  CHECK(step.train.optimizer.schedule.values == std::vector<double>{0.1, 0.01, 0.001});
  check_round_trip(step);
  CHECK(parsed("{sgd: {learning_rate: 0.1, schedule: {step: {boundaries: [5], values: [0.1, 0.01]}}}}")
            .train.optimizer.learning_rate == 0.1);

  Config warmup = parsed("{sgd: {schedule: {constant: {warmup_steps: 10}}}}");
  CHECK(warmup.train.optimizer.schedule.warmup_steps == 10);
  check_round_trip(warmup);
  check_round_trip(parsed("{sgd: {schedule: constant}}"));
}

TEST_CASE("optimizer and schedule errors: FILE:LINE:COL, the key, a suggestion") {
  check_error(with("adamx"), "adamx", {"train.optimizer", "expected one of", "adamw"});
  check_error(with("{sgd: {momentun: 0.9}}"), "momentun", {"unknown key 'momentun'", "did you mean 'momentum'?"});
  check_error(with("{adam: {momentum: 0.9}}"), "momentum", {"unknown key 'momentum'"});
  check_error(with("{sgd: {beta_1: 0.9}}"), "beta_1", {"unknown key 'beta_1'"});
  check_error(with("{sgd: {momentum: 1.5}}"), "1.5", {"train.optimizer.sgd.momentum", "expected a number in [0, 1)"});
  check_error(with("{sgd: {nesterov: true}}"), "true", {"nesterov needs a momentum > 0"});
  check_error(with("{sgd: {momentum: 0.9, nesterov: maybe}}"), "maybe", {"expected true or false"});
  check_error(with("{adamw: {weight_decay: -0.1}}"), "-0.1", {"train.optimizer.adamw.weight_decay", "decoupled"});
  check_error(with("{sgd: {schedule: {cosin: {decay_steps: 10}}}}"), "cosin",
              {"unknown schedule 'cosin'", "did you mean 'cosine'?"});
  check_error(with("{sgd: {schedule: {cosine: {warmup_steps: 10}}}}"), "{warmup_steps: 10}",
              {"missing required key 'decay_steps'"});
  check_error(with("{sgd: {schedule: {cosine: {decay_steps: 0}}}}"), "0}", {"decay_steps"}, "schedule");
  check_error(with("{sgd: {schedule: {cosine: {decay_steps: 10, alpha: 2}}}}"), "2}", {"alpha", "[0, 1]"}, "schedule");
  check_error(with("{sgd: {schedule: {cosine: {decay_steps: 10, decay_rate: 0.5}}}}"), "decay_rate",
              {"unknown key 'decay_rate'", "cosine schedule"});
  check_error(with("{sgd: {schedule: {linear: {decay_steps: 10, end_learning_rat: 0}}}}"), "end_learning_rat",
              {"did you mean 'end_learning_rate'?"});
  check_error(with("{sgd: {schedule: {exponential: {decay_steps: 10}}}}"), "{decay_steps: 10}",
              {"missing required key 'decay_rate'"});
  check_error(with("{sgd: {schedule: {exponential: {decay_steps: 10, decay_rate: 0}}}}"), "0}",
              {"decay_rate", "expected a number > 0"}, "decay_rate");
  check_error(with("{sgd: {schedule: {constant: {warmup_steps: -1}}}}"), "-1", {"warmup_steps"});
  check_error(with("{sgd: {schedule: {step: {boundaries: [10, 5], values: [0.1, 0.01, 0.001]}}}}"), "5]",
              {"boundaries[1]"});
  check_error(with("{sgd: {schedule: {step: {boundaries: [10], values: [0.1]}}}}"), "[0.1]",
              {"expected a list of 2 learning rates (one more than boundaries)"});
  check_error(with("{sgd: {schedule: {step: {boundaries: [], values: [0.1]}}}}"), "[]", {"expected a list of steps"});
  check_error(with("{sgd: {learning_rate: 0.5, schedule: {step: {boundaries: [10], values: [0.1, 0.01]}}}}"), "0.5",
              {"values[0] is 0.1", "drop learning_rate"});
}

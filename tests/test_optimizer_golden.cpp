// SGD with momentum / nesterov / weight decay, Adam with weight decay, AdamW and the learning-rate schedules
// against REAL Keras on the same gradients (tests/golden/optimizer_keras.txt, written by
// tests/golden/make_optimizer_golden.py), on one device and flat sharded over 4 (ZeRO-1 chunks, padded);
// the schedules against their closed forms; and the new updates against a scalar double reference.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "core/optim/optimizer.hpp"
#include "core/optim/schedule.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct GoldenCase {
  std::string name, optimizer, schedule;
  double learning_rate = 0, momentum = 0, weight_decay = 0, beta_1 = 0, beta_2 = 0, epsilon = 0;
  bool nesterov = false;
  double p1 = 0, p2 = 0, p3 = 0;
  int64_t size = 0;
  int steps = 0;
  std::vector<float> init;
  std::vector<std::vector<float>> grads, afters;
};

std::vector<float> read_values(std::istringstream& fields) {
  std::vector<float> values;
  double v;
  while (fields >> v) values.push_back(float(v));
  return values;
}

std::vector<GoldenCase> read_golden() {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "golden" / "optimizer_keras.txt";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path.string());
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string word;
    fields >> word;
    if (word == "case") {
      GoldenCase c;
      int nesterov = 0;
      fields >> c.name >> c.optimizer >> c.learning_rate >> c.momentum >> nesterov >> c.weight_decay >> c.beta_1 >>
          c.beta_2 >> c.epsilon >> c.schedule >> c.p1 >> c.p2 >> c.p3 >> c.size >> c.steps;
      c.nesterov = nesterov != 0;
      cases.push_back(c);
    } else if (word == "init") {
      cases.back().init = read_values(fields);
    } else if (word == "grad") {
      cases.back().grads.push_back(read_values(fields));
    } else if (word == "after") {
      cases.back().afters.push_back(read_values(fields));
    }
  }
  return cases;
}

optim::LearningRateSchedule golden_schedule(const GoldenCase& c) {
  optim::LearningRateSchedule s;
  s.learning_rate = c.learning_rate;
  if (c.schedule == "cosine") {
    s.kind = optim::ScheduleKind::cosine;
    s.decay_steps = int64_t(c.p1);
    s.alpha = c.p2;
  } else if (c.schedule == "exponential") {
    s.kind = optim::ScheduleKind::exponential;
    s.decay_steps = int64_t(c.p1);
    s.decay_rate = c.p2;
    s.staircase = c.p3 != 0;
  } else if (c.schedule == "linear") {
    s.kind = optim::ScheduleKind::linear;
    s.decay_steps = int64_t(c.p1);
    s.end_learning_rate = c.p2;
  } else if (c.schedule == "step") {
    s.kind = optim::ScheduleKind::step;
    s.boundaries = {int64_t(c.p1)};
    s.values = {c.p2, c.p3};
    s.learning_rate = c.p2;
  }
  return s;
}

std::unique_ptr<optim::Optimizer> golden_optimizer(const GoldenCase& c) {
  std::unique_ptr<optim::Optimizer> optimizer;
  if (c.optimizer == "sgd") {
    optimizer = optim::make_sgd(
        optim::SgdOptions{float(c.learning_rate), float(c.momentum), c.nesterov, float(c.weight_decay)});
  } else {
    const optim::AdamOptions adam{float(c.learning_rate), float(c.beta_1), float(c.beta_2), float(c.epsilon),
                                  float(c.weight_decay)};
    optimizer = c.optimizer == "adam" ? optim::make_adam(adam) : optim::make_adamw(adam);
  }
  optimizer->set_schedule(golden_schedule(c));
  return optimizer;
}

// Runs the steps with loss = sum(w * g_t), whose gradient is g_t; returns the variable after each step.
std::vector<Tensor> run_steps(const MeshPtr& mesh, const std::function<std::unique_ptr<optim::Optimizer>()>& make,
                              const std::vector<float>& init, const std::vector<std::vector<float>>& grads,
                              int64_t min_sharded, std::string* name = nullptr) {
  const int64_t size = int64_t(init.size());
  std::vector<Tensor> afters(grads.size());
  std::mutex mutex;
  run_spmd(mesh, [&](DeviceContext& device) {
    const Layout layout = Layout::replicated(mesh, 1);
    Tensor w0({size});
    for (int64_t i = 0; i < size; ++i) w0[i] = init[size_t(i)];
    nn::Parameters params;
    params.add("w", Var(DTensor({size}, layout, w0), true));
    std::unique_ptr<optim::Optimizer> optimizer = make();
    optimizer->build(params, min_sharded);
    for (size_t t = 0; t < grads.size(); ++t) {
      Tensor g({size});
      for (int64_t i = 0; i < size; ++i) g[i] = grads[t][size_t(i)];
      Var weight(DTensor({size}, layout, g));
      backward(reduce_sum(multiply(params.at("w"), weight), {0}));
      optimizer->apply(params);
      if (device.rank == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        afters[t] = params.at("w").value().local().clone();
      }
    }
    if (device.rank == 0 && name) *name = optimizer->name();
  });
  return afters;
}

}  // namespace

TEST_CASE("optimizers and schedules match real Keras on the same gradients, on one device and flat sharded") {
  const std::vector<GoldenCase> cases = read_golden();
  REQUIRE(cases.size() >= 9);
  for (const GoldenCase& c : cases) {
    CAPTURE(c.name);
    REQUIRE(int(c.grads.size()) == c.steps);
    REQUIRE(int(c.afters.size()) == c.steps);
    for (const MeshPtr& mesh : {make_mesh({"x"}, {1}), make_mesh({"x"}, {4})}) {
      CAPTURE(mesh->to_string());
      std::string name;
      // min_sharded 1: split over the 4 ranks in chunks of 2 values (the last one padded).
      const std::vector<Tensor> afters = run_steps(mesh, [&] { return golden_optimizer(c); }, c.init, c.grads, 1, &name);
      CHECK(name == (c.optimizer == "sgd" ? (c.momentum > 0 ? "sgd_momentum" : "sgd") : c.optimizer));
      for (int t = 0; t < c.steps; ++t)
        for (int64_t i = 0; i < c.size; ++i) {
          INFO("step " << t + 1 << " value " << i);
          CHECK(afters[size_t(t)][i] == doctest::Approx(c.afters[size_t(t)][size_t(i)]).epsilon(2e-6).scale(1.0));
        }
    }
  }
}

TEST_CASE("SGD with momentum, nesterov and weight decay, and AdamW follow a scalar double reference") {
  std::vector<float> init{0.5f, -1.25f, 2.0f, 0.0f, -0.75f};
  std::vector<std::vector<float>> grads;
  for (int t = 0; t < 5; ++t) {
    std::vector<float> g;
    for (size_t i = 0; i < init.size(); ++i) g.push_back(float(std::sin(1.7 * double(t) + double(i))));
    grads.push_back(g);
  }
  const MeshPtr single = make_mesh({"x"}, {1});
  for (const bool nesterov : {false, true}) {
    const optim::SgdOptions options{0.1f, 0.8f, nesterov, 0.02f};
    const std::vector<Tensor> got = run_steps(single, [&] { return optim::make_sgd(options); }, init, grads, 1 << 30);
    for (size_t i = 0; i < init.size(); ++i) {
      double w = init[i], velocity = 0;
      for (size_t t = 0; t < grads.size(); ++t) {
        w -= 0.1 * 0.02 * w;
        velocity = 0.8 * velocity - 0.1 * grads[t][i];
        w += nesterov ? 0.8 * velocity - 0.1 * grads[t][i] : velocity;
        CHECK(got[t][int64_t(i)] == doctest::Approx(w).epsilon(1e-5));
      }
    }
  }
  {  // AdamW under a warmup + cosine schedule
    optim::LearningRateSchedule schedule;
    schedule.kind = optim::ScheduleKind::cosine;
    schedule.learning_rate = 0.01;
    schedule.warmup_steps = 2;
    schedule.decay_steps = 3;
    schedule.alpha = 0.2;
    const std::vector<Tensor> got = run_steps(single, [&] {
      auto adamw = optim::make_adamw({0.01f, 0.9f, 0.999f, 1e-7f, 0.004f});
      adamw->set_schedule(schedule);
      return adamw;
    }, init, grads, 1 << 30);
    for (size_t i = 0; i < init.size(); ++i) {
      double w = init[i], m = 0, v = 0;
      for (size_t t = 0; t < grads.size(); ++t) {
        const double lr = schedule.rate(int64_t(t)), g = grads[t][i];
        w -= lr * 0.004 * w;
        m = 0.9 * m + 0.1 * g;
        v = 0.999 * v + 0.001 * g * g;
        const double step = double(t + 1);
        w -= lr * std::sqrt(1 - std::pow(0.999, step)) / (1 - std::pow(0.9, step)) * m / (std::sqrt(v) + 1e-7);
        CHECK(got[t][int64_t(i)] == doctest::Approx(w).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("learning-rate schedules follow their closed forms") {
  using optim::ScheduleKind;
  optim::LearningRateSchedule s;
  s.learning_rate = 0.1;
  CHECK(s.rate(0) == 0.1);
  CHECK(s.rate(1000000) == 0.1);
  s.warmup_steps = 4;  // constant with warmup: 0.025, 0.05, 0.075, 0.1, 0.1 ...
  CHECK(s.rate(0) == doctest::Approx(0.025));
  CHECK(s.rate(2) == doctest::Approx(0.075));
  CHECK(s.rate(3) == doctest::Approx(0.1));
  CHECK(s.rate(50) == 0.1);

  s.kind = ScheduleKind::cosine;
  s.decay_steps = 10;
  s.alpha = 0.1;
  for (int64_t step = 4; step < 20; ++step) {
    const double d = double(std::min<int64_t>(step - 4, 10)) / 10.0;
    CHECK(s.rate(step) == doctest::Approx(0.1 * (0.9 * 0.5 * (1 + std::cos(std::numbers::pi * d)) + 0.1)));
  }
  CHECK(s.rate(4) == doctest::Approx(0.1));
  CHECK(s.rate(14) == doctest::Approx(0.01));
  CHECK(s.rate(9) == doctest::Approx(0.1 * (0.9 * 0.5 + 0.1)));

  s.kind = ScheduleKind::linear;
  s.end_learning_rate = 0.02;
  CHECK(s.rate(4) == doctest::Approx(0.1));
  CHECK(s.rate(9) == doctest::Approx(0.06));
  CHECK(s.rate(14) == doctest::Approx(0.02));
  CHECK(s.rate(100) == doctest::Approx(0.02));

  s.kind = ScheduleKind::exponential;
  s.decay_rate = 0.5;
  s.decay_steps = 2;
  CHECK(s.rate(5) == doctest::Approx(0.1 * std::pow(0.5, 0.5)));
  CHECK(s.rate(8) == doctest::Approx(0.025));
  s.staircase = true;
  CHECK(s.rate(5) == doctest::Approx(0.1));
  CHECK(s.rate(7) == doctest::Approx(0.05));

  s.kind = ScheduleKind::step;
  s.warmup_steps = 0;
  s.boundaries = {10, 20};
  s.values = {0.1, 0.01, 0.001};
  CHECK(s.rate(0) == 0.1);
  CHECK(s.rate(10) == 0.1);
  CHECK(s.rate(11) == 0.01);
  CHECK(s.rate(20) == 0.01);
  CHECK(s.rate(21) == 0.001);

  // The optimizer takes its rate from the schedule: learning_rate_at(step) is the rate of update step + 1.
  auto sgd = optim::make_sgd(0.5f);
  CHECK(sgd->learning_rate_at(0) == doctest::Approx(0.5));
  sgd->set_schedule(s);
  CHECK(sgd->learning_rate_at(15) == 0.01);
  optim::LearningRateSchedule bad = s;
  bad.values.pop_back();
  CHECK_THROWS_WITH(sgd->set_schedule(bad), doctest::Contains("one more value than boundaries"));
}

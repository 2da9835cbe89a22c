// The binary head (issue 28): loss: binary_crossentropy over a 1-unit sigmoid. The loss and its gradient
// against real Keras (tests/golden/make_binary_crossentropy_golden.py: BinaryCrossentropy, from_logits=False,
// probabilities clipped to [1e-7, 1 - 1e-7]), on the probabilities and through a sigmoid; the predicted class
// (p > 0.5) on sharded batches; a separable problem learned to the same losses on {1} and {8}; the config
// errors of a head that is not a 1-unit sigmoid or data that is not two classes.
#include <doctest/doctest.h>

#include <cmath>

#include "core/ops/activations.hpp"
#include "core/ops/binary_crossentropy.hpp"
#include "core/train/loss.hpp"
#include "engine/data_source.hpp"
#include "engine/model_builder.hpp"
#include "tests/golden_file.hpp"
#include "tests/training_fixture.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

std::map<std::string, Tensor> golden() {
  std::map<std::string, Tensor> tensors;
  read_golden_lines("binary_crossentropy_keras.txt", [&](const std::string& kind, std::istringstream& fields, const std::string&) {
    if (kind == "tensor") tensors.insert(read_golden_tensor(fields));
  });
  return tensors;
}

// Per-example losses and d mean / d input on one device: the cotangent of each example is 1 / N.
SpmdResult mean_loss(const Tensor& input, const Tensor& labels, const VarOp& op) {
  MeshPtr single = make_mesh({"x"}, {1});
  const int64_t n = input.dim(0);
  return run_op(single, {input, labels}, {Layout::replicated(single, 2), Layout::replicated(single, 2)}, op,
                Tensor({n}, 1.0f / float(n)));
}

void check_near(const Tensor& actual, const Tensor& expected, double relative, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (int64_t i = 0; i < actual.size(); ++i) {
    const double tolerance = relative * std::max(1.0, std::fabs(double(expected[i])));
    CHECK_MESSAGE(std::fabs(double(actual[i]) - double(expected[i])) <= tolerance,  // NaN fails
                  what << "[" << i << "]: " << actual[i] << " vs Keras' " << expected[i]);
  }
}

double mean_of(const Tensor& t) {
  double sum = 0;
  for (int64_t i = 0; i < t.size(); ++i) sum += t[i];
  return sum / double(t.size());
}

std::vector<std::string> binary_settings(const std::string& mesh) {
  return {"data.image_shape=flat", "data.layout=[batch, unsharded]", "data.batch_size=32", "train.epochs=4",
          "mesh.dims=" + mesh, "train.loss=binary_crossentropy", "train.optimizer={adam: {learning_rate: 0.01}}",
          "model=[{dense: 16, activation: relu, name: hidden}, {dense: 1, activation: sigmoid, name: out}]"};
}

}  // namespace

TEST_CASE("binary cross-entropy of probabilities: loss and gradient equal real Keras, clipped ends included") {
  const std::map<std::string, Tensor> g = golden();
  const Tensor& p = g.at("probabilities");
  const Tensor& z = g.at("labels");
  const SpmdResult direct = mean_loss(p, z, [](const std::vector<Var>& v) {
    return binary_crossentropy_probabilities(v[0], v[1].value());
  });
  check_near(direct.output, g.at("per_example"), 1e-6, "per-example loss");
  CHECK(std::fabs(mean_of(direct.output) - g.at("loss")[0]) <= 1e-6 * g.at("loss")[0]);
  check_near(direct.grads[0], g.at("grad"), 1e-5, "d loss / d probability");
  // Through a sigmoid, the gradient with respect to the logits (0 where the probability is clipped).
  const SpmdResult chained = mean_loss(g.at("logits"), z, [](const std::vector<Var>& v) {
    return binary_crossentropy_probabilities(sigmoid(v[0]), v[1].value());
  });
  CHECK(std::fabs(mean_of(chained.output) - g.at("sigmoid_loss")[0]) <= 1e-6 * g.at("sigmoid_loss")[0]);
  check_near(chained.grads[0], g.at("sigmoid_grad"), 1e-5, "d loss / d logit");
  // The head's dispatch: labels [B] become the targets [B, 1].
  MeshPtr single = make_mesh({"x"}, {1});
  Tensor labels({z.dim(0)});
  for (int64_t i = 0; i < z.size(); ++i) labels[i] = z[i];
  const Tensor via_head = run_op(single, {p, labels}, {Layout::replicated(single, 2), Layout::replicated(single, 1)},
                                 [](const std::vector<Var>& v) {
                                   return train::per_example_loss(train::Loss::BinaryCrossentropy, v[0], v[1].value());
                                 },
                                 Tensor(), false)
                              .output;
  check_near(via_head, g.at("per_example"), 1e-6, "per_example_loss");
}

TEST_CASE("the binary head predicts class 1 above 0.5 (0.5 itself: class 0) on every batch sharding") {
  const Tensor p = Tensor::from_vector({8, 1}, {0.2f, 0.5f, 0.50000006f, 0.9f, 0.0f, 1.0f, 0.49999997f, 0.7f});
  const std::vector<float> expected{0, 0, 1, 1, 0, 1, 0, 1};
  for (const MeshPtr& mesh : test_meshes()) {
    for (const Layout& layout : all_layouts(mesh, p.shape())) {
      CAPTURE(mesh->to_string());
      CAPTURE(layout.specs_string());
      const Tensor predicted =
          run_op(mesh, {p}, {layout},
                 [](const std::vector<Var>& v) { return Var(train::predicted_classes(train::Loss::BinaryCrossentropy, v[0].value())); },
                 Tensor(), false)
              .output;
      REQUIRE(predicted.size() == 8);
      for (int64_t i = 0; i < 8; ++i) CHECK(predicted[i] == expected[size_t(i)]);
    }
  }
  CHECK(train::class_count(train::Loss::BinaryCrossentropy, 1) == 2);
  CHECK(train::class_count(train::Loss::SparseSoftmaxCrossEntropy, 10) == 10);
  const Tensor both = train::binary_class_probabilities(Tensor::from_vector({2, 1}, {0.25f, 0.9f}));
  CHECK(both.shape() == Shape{2, 2});
  CHECK(both[0] == 0.75f);
  CHECK(both[1] == 0.25f);
  CHECK(both[3] == 0.9f);
}

TEST_CASE("the binary head learns a separable problem, to the same losses on {1} and {8}") {
  const data::Dataset examples = generated(32 * 16, 20, 2, false);
  const data::Dataset test = generated(200, 20, 2, false);
  std::vector<double> reference;
  for (const std::string mesh : {"{batch: 1}", "{batch: 8}"}) {
    CAPTURE(mesh);
    const Config config = load_config(config_path("mnist_keras_dp.yaml"), LoadOptions{binary_settings(mesh), "", false, "", {}});
    MeshPtr built_mesh = build_mesh(config);
    BuiltModel built = build_model(config, built_mesh, examples.example_shape());
    train::Trainer trainer(*built.model, built_mesh, input_specs(config), train_options(config));
    DatasetSource source(examples, true, config.data.shuffle.seed), test_source(test, false, 0);
    QuietReporter quiet;
    const train::TrainResult result = trainer.train(source, &test_source, quiet);
    check_learns(result.step_losses, "binary head on " + mesh);
    const train::SplitMetrics& last = result.epochs.back();
    REQUIRE(last.split == "test");
    CHECK(last.examples == 200);
    CHECK(last.accuracy > 0.9);
    REQUIRE(last.class_examples.size() == 2);  // two classes from one unit
    CHECK(last.class_examples[0] + last.class_examples[1] == 200);
    if (reference.empty()) reference = result.step_losses;
    else check_same_losses(reference, result.step_losses, "{batch: 8} against {batch: 1}", 1e-5);
  }
}

TEST_CASE("binary_crossentropy needs a 1-unit sigmoid head and two classes") {
  const auto error_of = [](std::vector<std::string> overrides, int classes) {
    try {
      const Config config = load_config(config_path("mnist_keras_dp.yaml"), LoadOptions{overrides, "", false, "", {}});
      MeshPtr mesh = build_mesh(config);
      BuiltModel built = build_model(config, mesh, config.data.example_shape());
      check_output_classes(config, *built.model, classes);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::vector<std::string> ok = binary_settings("{batch: 1}");
  CHECK(error_of(ok, 2) == "no error");
  CHECK(error_of(ok, 10).find("binary_crossentropy needs labels 0 and 1 (two classes), but mnist has 10 classes") !=
        std::string::npos);
  std::vector<std::string> two = ok;
  two.push_back("model=[{dense: 2, activation: sigmoid}]");
  CHECK(error_of(two, 2).find("the model must end in a 1-unit sigmoid") != std::string::npos);
  std::vector<std::string> linear = ok;
  linear.push_back("model=[{dense: 1}]");
  CHECK(error_of(linear, 2).find("and not a sigmoid's") != std::string::npos);
  CHECK(error_of(linear, 2).rfind("--set train.loss=binary_crossentropy: ", 0) == 0);  // at train.loss
  std::vector<std::string> layer = ok;
  layer.push_back("model=[{dense: 1}, {sigmoid: {}}]");
  CHECK(error_of(layer, 2) == "no error");
}

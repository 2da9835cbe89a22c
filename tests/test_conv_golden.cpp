// conv2d, max_pool2d and avg_pool2d against REAL Keras (tests/golden/conv_keras.txt, written by
// tests/golden/make_conv_golden.py with TensorFlow's Conv2D / MaxPooling2D / AveragePooling2D): the output and
// the gradients of sum(output * cotangent) for the input, kernel and bias, on one device and with the image
// rows cut into two bands (where the window allows it), 'same' and 'valid' padding, strides 1 and 2.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/ops/conv.hpp"
#include "core/ops/pool.hpp"
#include "tests/golden_file.hpp"
#include "tests/spmd_harness.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

struct GoldenCase {
  std::string name, op, padding;
  int64_t kh = 0, kw = 0, sh = 0, sw = 0;
  std::map<std::string, Tensor> tensors;
};

std::vector<GoldenCase> read_golden() {
  std::vector<GoldenCase> cases;
  read_golden_lines("conv_keras.txt", [&](const std::string& kind, std::istringstream& fields, const std::string& line) {
    std::string word;
    if (kind == "case") {
      GoldenCase golden;
      fields >> golden.name >> word >> golden.op >> word >> golden.kh >> word >> golden.kw >> word >> golden.sh >> word >>
          golden.sw >> word >> golden.padding;
      REQUIRE_MESSAGE(fields, line);
      cases.push_back(golden);
    } else if (kind == "tensor") {
      REQUIRE(!cases.empty());
      auto [name, t] = read_golden_tensor(fields);
      cases.back().tensors[name] = t;
    }
  });
  return cases;
}

}  // namespace

TEST_CASE("conv2d and pooling equal Keras: outputs and gradients, on one device and on row bands") {
  const std::vector<GoldenCase> cases = read_golden();
  REQUIRE(cases.size() == 7);
  for (const GoldenCase& golden : cases) {
    CAPTURE(golden.name);
    const bool conv = golden.op == "conv2d";
    const Padding padding = golden.padding == "same" ? Padding::Same : Padding::Valid;
    const Tensor& x = golden.tensors.at("x");
    std::vector<Tensor> inputs{x};
    if (conv) inputs.insert(inputs.end(), {golden.tensors.at("kernel"), golden.tensors.at("bias")});
    const VarOp op = [&](const std::vector<Var>& v) {
      if (conv) return conv2d(v[0], v[1], v[2], Conv2dOptions{golden.sh, golden.sw, padding});
      const Pool2dOptions pool{golden.kh, golden.kw, golden.sh, golden.sw, padding};
      return golden.op == "max_pool2d" ? max_pool2d(v[0], pool) : avg_pool2d(v[0], pool);
    };
    std::vector<std::pair<MeshPtr, std::vector<std::string>>> placements{{make_mesh({"x"}, {1}), {kUnsharded}}};
    const bool bands = ops::window_band_problem(golden.op, 1, x.shape()[1], 2, "rows", golden.kh, golden.sh, padding).empty();
    if (bands) placements.push_back({make_mesh({"rows"}, {2}), {"rows"}});
    CHECK_MESSAGE((bands || golden.name.find("stride2") != std::string::npos), "a stride-1 case should run on bands");
    for (const auto& [mesh, row_spec] : placements) {
      CAPTURE(mesh->size());
      std::vector<Layout> layouts{Layout({kUnsharded, row_spec[0], kUnsharded, kUnsharded}, mesh)};
      for (size_t i = 1; i < inputs.size(); ++i) layouts.push_back(Layout::replicated(mesh, inputs[i].rank()));
      const SpmdResult result = run_op(mesh, inputs, layouts, op, golden.tensors.at("cotangent"));
      std::string why;
      CHECK_MESSAGE(close(result.output, golden.tensors.at("y"), 1e-5f, &why), "y " << why);
      CHECK_MESSAGE(close(result.grads[0], golden.tensors.at("dx"), 1e-5f, &why), "dx " << why);
      if (conv) {
        CHECK_MESSAGE(close(result.grads[1], golden.tensors.at("dkernel"), 1e-5f, &why), "dkernel " << why);
        CHECK_MESSAGE(close(result.grads[2], golden.tensors.at("dbias"), 1e-5f, &why), "dbias " << why);
      }
    }
  }
}

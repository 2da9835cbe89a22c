#include "core/train/predict.hpp"

#include <algorithm>
#include <mutex>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/ops/precision.hpp"

namespace dtrain::train {

Tensor predict(const nn::Model& model, const MeshPtr& mesh, const std::vector<std::string>& input_specs,
               const Tensor& inputs, int64_t batch_size,
               const std::function<void(nn::Parameters&, int rank)>& restore, bool bf16) {
  DTRAIN_CHECK(inputs.rank() >= 2 && inputs.dim(0) >= 1 && batch_size >= 1,
               "[predict] inputs must be [N, ...] with N >= 1, and batch_size >= 1");
  const int64_t count = inputs.dim(0), example = inputs.size() / std::max<int64_t>(count, 1);
  std::vector<std::string> specs = input_specs;
  specs.resize(inputs.rank(), kUnsharded);
  const Layout layout(specs, mesh);
  Shape output_shape;
  std::vector<float> outputs;
  std::mutex mutex;
  // Every rank in this process: prediction is small (a 1-device mesh), and its outputs are returned here
  // whole. Under mpirun each process predicts alone and process 0 prints.
  const precision::Bf16Products products(bf16);
  run_spmd_in_process(mesh, [&](DeviceContext& device) {
    nn::Parameters params = model.initialize(device.rank);
    restore(params, device.rank);
    NoGradGuard no_grad;
    for (int64_t begin = 0; begin < count; begin += batch_size) {
      const int64_t size = std::min(batch_size, count - begin);
      Shape shape = inputs.shape();
      shape[0] = size;
      Tensor batch(shape);
      std::copy(inputs.data() + begin * example, inputs.data() + (begin + size) * example, batch.data());
      layout.check_shape(shape);
      nn::ForwardContext context{params, false, 0};
      context.bf16 = bf16;
      Var y = model.forward(Var(DTensor(shape, layout, pack(batch, layout, device.rank))), context);
      DTensor whole = redistribute(y.value(), Layout::replicated(mesh, y.value().rank()));
      if (device.rank != 0) continue;
      std::lock_guard<std::mutex> lock(mutex);
      output_shape = whole.global_shape();
      outputs.insert(outputs.end(), whole.local().data(), whole.local().data() + whole.local().size());
    }
  });
  output_shape[0] = count;
  return Tensor::from_vector(output_shape, outputs);
}

}  // namespace dtrain::train

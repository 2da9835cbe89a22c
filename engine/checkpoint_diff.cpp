#include "engine/checkpoint_diff.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"

namespace dtrain {
namespace {

using checkpoint::CheckpointIndex;
using checkpoint::CheckpointMeta;
using checkpoint::TensorRecord;

// A float's bits as a signed integer ordered like the floats: neighbours differ by 1, -0 and +0 are both 0.
int64_t ordered(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const int64_t magnitude = int64_t(bits & 0x7fffffffu);
  return (bits & 0x80000000u) ? -magnitude : magnitude;
}

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// Compares a tensor of equal shape on both sides, a block of whole trailing rows at a time: the block's
// values are contiguous in row-major order, and at most block_values of them (at least one row along
// the axis it walks).
void compare_tensor(const TensorRecord& a, const TensorRecord& b, checkpoint::BlockReader& read_a,
                    checkpoint::BlockReader& read_b, int64_t block_values, TensorDiff& diff) {
  const Shape& dims = a.global_shape;
  if (num_elements(dims) == 0) return;
  const int axes = int(dims.size());
  // The axis walked (`walk`): the outermost whose trailing rows fit in a block; axes before it go one by one.
  int walk = 0;
  int64_t inner = num_elements(dims) / dims[0];
  while (walk < axes - 1 && inner > block_values) {
    ++walk;
    inner /= dims[walk];
  }
  const int64_t rows = std::clamp<int64_t>(block_values / inner, 1, dims[walk]);
  std::vector<float> values_a(size_t(rows * inner)), values_b(size_t(rows * inner));
  Shape begin(size_t(axes), 0), extent = dims;
  for (int axis = 0; axis < walk; ++axis) extent[axis] = 1;
  for (;;) {
    int64_t outer = 0;  // row-major index of begin among the axes before `walk`
    for (int axis = 0; axis < walk; ++axis) outer = outer * dims[axis] + begin[axis];
    for (int64_t at = 0; at < dims[walk]; at += rows) {
      begin[walk] = at;
      extent[walk] = std::min(rows, dims[walk] - at);
      read_a.read(a, begin, extent, values_a.data());
      read_b.read(b, begin, extent, values_b.data());
      compare_values(values_a.data(), values_b.data(), extent[walk] * inner, (outer * dims[walk] + at) * inner, diff);
    }
    begin[walk] = 0;
    int axis = walk;  // the next position of the outer axes, the last fastest
    while (axis > 0 && ++begin[axis - 1] == dims[axis - 1]) begin[--axis] = 0;
    if (axis == 0) break;
  }
  if (diff.differing > 0) diff.kind = TensorDiff::Kind::differs;
}

// "{batch: 4, model: 2} on 8 CPU devices" for a stored Mesh::to_string(); the text itself when unreadable.
std::string mesh_text(const std::string& stored) {
  try {
    return Mesh::from_string(stored).describe();
  } catch (const Error&) {
    return stored;
  }
}

// Lines for what differs in where the runs stood (state) and what may legitimately differ (notes).
void compare_meta(const CheckpointMeta& a, const CheckpointMeta& b, CheckpointDiff& diff) {
  auto differs = [&](const std::string& what, const auto& x, const auto& y) {
    if (x != y) diff.state_differences.push_back(fmt::format("{}: {} vs {}", what, x, y));
  };
  differs("step", a.step, b.step);
  differs("position", checkpoint::position_text(a), checkpoint::position_text(b));
  differs("epochs finished", a.epochs_done, b.epochs_done);
  differs("shuffle seed", a.shuffle_seed, b.shuffle_seed);
  differs("optimizer", a.optimizer, b.optimizer);
  differs("optimizer iterations", a.iterations, b.iterations);
  differs("epoch's loss sum so far", fmt::format("{:.17g}", a.epoch_loss_sum), fmt::format("{:.17g}", b.epoch_loss_sum));
  differs("epoch's correct so far", a.epoch_correct, b.epoch_correct);
  differs("epoch's examples so far", a.epoch_examples, b.epoch_examples);
  if (a.validation_state != b.validation_state) diff.state_differences.push_back("validation records differ");
  if (a.vocabulary != b.vocabulary) diff.state_differences.push_back("vectorizer vocabularies differ");
  const bool idf_equal = a.idf.size() == b.idf.size() &&
                         (a.idf.empty() || std::memcmp(a.idf.data(), b.idf.data(), a.idf.size() * sizeof(float)) == 0);
  if (!idf_equal) diff.state_differences.push_back("vectorizer idf weights differ");
  if (a.class_names != b.class_names) diff.state_differences.push_back("class names differ");
  auto note = [&](const std::string& what, const std::string& x, const std::string& y) {
    if (x != y) diff.notes.push_back(fmt::format("{}: {} vs {}", what, x, y));
  };
  note("mesh", mesh_text(a.mesh), mesh_text(b.mesh));
  note("run", a.run_id, b.run_id);
  if (a.config != b.config) diff.notes.push_back("configs differ (the stored config texts)");
}

std::string kind_label(TensorDiff::Kind kind) {
  switch (kind) {
    case TensorDiff::Kind::identical: return "identical";
    case TensorDiff::Kind::differs: return "differs";
    case TensorDiff::Kind::only_in_a: return "only in A";
    case TensorDiff::Kind::only_in_b: return "only in B";
    case TensorDiff::Kind::shape_mismatch: return "shapes differ";
  }
  return "?";
}

}  // namespace

void compare_values(const float* a, const float* b, int64_t count, int64_t base, TensorDiff& diff) {
  if (std::memcmp(a, b, size_t(count) * sizeof(float)) == 0) return;
  for (int64_t i = 0; i < count; ++i) {
    if (same_bits(a[i], b[i])) continue;
    ++diff.differing;
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      ++diff.nan_mismatch;
      continue;
    }
    const double x = a[i], y = b[i];
    const double gap = std::fabs(x - y), scale = std::max(std::fabs(x), std::fabs(y));
    diff.max_abs = std::max(diff.max_abs, gap);
    if (scale > 0 && std::isfinite(scale)) diff.max_relative = std::max(diff.max_relative, gap / scale);
    const uint64_t ulps = ulp_distance(a[i], b[i]);
    if (ulps > diff.max_ulp || diff.max_ulp_at < 0) {
      diff.max_ulp = ulps;
      diff.max_ulp_at = base + i;
    }
  }
}

uint64_t ulp_distance(float a, float b) {
  const int64_t x = ordered(a), y = ordered(b);
  return uint64_t(x > y ? x - y : y - x);
}

bool CheckpointDiff::identical() const {
  return state_differences.empty() && std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& tensor) {
           return tensor.kind == TensorDiff::Kind::identical;
         });
}

CheckpointDiff diff_checkpoints(const CheckpointIndex& a, const CheckpointIndex& b, int64_t block_values) {
  DTRAIN_CHECK(block_values >= 1, "[diff] block_values must be positive, not {}", block_values);
  CheckpointDiff diff;
  diff.folder_a = a.folder;
  diff.folder_b = b.folder;
  compare_meta(a.meta, b.meta, diff);
  checkpoint::BlockReader read_a(a), read_b(b);
  for (const TensorRecord& tensor : a.tensors) {
    TensorDiff entry;
    entry.name = tensor.name;
    entry.shape_a = tensor.global_shape;
    const TensorRecord* other = b.find(tensor.name);
    if (other == nullptr) {
      entry.kind = TensorDiff::Kind::only_in_a;
    } else if (other->global_shape != tensor.global_shape) {
      entry.kind = TensorDiff::Kind::shape_mismatch;
      entry.shape_b = other->global_shape;
    } else {
      entry.shape_b = other->global_shape;
      compare_tensor(tensor, *other, read_a, read_b, block_values, entry);
    }
    diff.tensors.push_back(std::move(entry));
  }
  for (const TensorRecord& tensor : b.tensors) {
    if (a.find(tensor.name) != nullptr) continue;
    TensorDiff entry;
    entry.name = tensor.name;
    entry.kind = TensorDiff::Kind::only_in_b;
    entry.shape_b = tensor.global_shape;
    diff.tensors.push_back(std::move(entry));
  }
  return diff;
}

std::string diff_report(const CheckpointDiff& diff) {
  std::string text = fmt::format("A: {}\nB: {}\n", diff.folder_a, diff.folder_b);
  for (const std::string& note : diff.notes) text += fmt::format("note: {}\n", note);
  int64_t differing = 0;
  for (const TensorDiff& tensor : diff.tensors) {
    const std::string label = kind_label(tensor.kind);
    switch (tensor.kind) {
      case TensorDiff::Kind::identical:
        text += fmt::format("{:<13} {} {}\n", label, tensor.name, shape_string(tensor.shape_a));
        break;
      case TensorDiff::Kind::differs: {
        text += fmt::format("{:<13} {} {}: {} of {} values, max abs diff {:.9g}, max rel diff {:.9g}, max ULP {}", label,
                            tensor.name, shape_string(tensor.shape_a), tensor.differing, num_elements(tensor.shape_a),
                            tensor.max_abs, tensor.max_relative, tensor.max_ulp);
        if (tensor.max_ulp_at >= 0) text += fmt::format(" (at index {})", tensor.max_ulp_at);
        if (tensor.nan_mismatch > 0) text += fmt::format(", {} NaN vs another value", tensor.nan_mismatch);
        text += "\n";
        break;
      }
      case TensorDiff::Kind::only_in_a:
        text += fmt::format("{:<13} {} {}\n", label, tensor.name, shape_string(tensor.shape_a));
        break;
      case TensorDiff::Kind::only_in_b:
        text += fmt::format("{:<13} {} {}\n", label, tensor.name, shape_string(tensor.shape_b));
        break;
      case TensorDiff::Kind::shape_mismatch:
        text += fmt::format("{:<13} {}: {} in A, {} in B\n", label, tensor.name, shape_string(tensor.shape_a),
                            shape_string(tensor.shape_b));
        break;
    }
    if (tensor.kind != TensorDiff::Kind::identical) ++differing;
  }
  for (const std::string& line : diff.state_differences) text += fmt::format("state differs: {}\n", line);
  if (diff.identical()) {
    text += fmt::format("verdict: identical ({} tensors, the step, data position and optimizer state bitwise equal)\n",
                        diff.tensors.size());
  } else {
    text += fmt::format("verdict: different ({} of {} tensors differ, {} state differences)\n", differing,
                        diff.tensors.size(), diff.state_differences.size());
  }
  return text;
}

}  // namespace dtrain

#include "core/ops/halo.hpp"

#include <algorithm>

#include "core/comm/tensor_view.hpp"
#include "core/article.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

namespace dtrain::ops {
namespace {

const char* padding_name(Padding padding) { return padding == Padding::Same ? "same" : "valid"; }

Shape with_extent(Shape shape, int axis, int64_t extent) {
  shape[axis] = extent;
  return shape;
}

Shape at(int rank, int axis, int64_t position) {
  Shape offset(rank, 0);
  offset[axis] = position;
  return offset;
}

// Member `member`'s chunk of a flat exchange buffer, shaped as `rows` rows of `like` along `axis`.
Tensor chunk(const Tensor& buffer, int member, int64_t count, const Tensor& like, int axis, int64_t rows) {
  return buffer.slice_view(member * count, with_extent(like.shape(), axis, rows));
}

}  // namespace

int64_t window_output_extent(int64_t extent, int64_t kernel, int64_t stride, Padding padding) {
  if (padding == Padding::Same) return (extent + stride - 1) / stride;
  return extent >= kernel ? (extent - kernel) / stride + 1 : 0;
}

namespace {

int64_t same_padding_before(int64_t extent, int64_t out, int64_t kernel, int64_t stride) {
  return std::max<int64_t>((out - 1) * stride + kernel - extent, 0) / 2;
}

}  // namespace

std::string window_band_problem(const std::string& op, int axis, int64_t extent, int parts, const std::string& spec,
                                int64_t kernel, int64_t stride, Padding padding) {
  if (parts <= 1) return {};
  const int64_t out = window_output_extent(extent, kernel, stride, padding);
  const int64_t band = extent / parts, out_band = out / parts;
  const char* axis_name = axis == 1 ? "rows" : "columns";
  if (extent % parts != 0 || out % parts != 0 || out_band * stride != band)
    return fmt::format("{}: its input's {} {} are cut into {} bands by mesh dim '{}', but {}-wide window with "
                       "stride {} and {} padding makes {} outputs, which do not form {} bands of {} (shard that axis "
                       "another way, relayout before this layer, or change the stride or padding)",
                       op, extent, axis_name, parts, spec, a_number(kernel), stride, padding_name(padding), out, parts,
                       double(band) / double(stride));
  const int64_t before = padding == Padding::Same ? same_padding_before(extent, out, kernel, stride) : 0;
  const int64_t after = std::max<int64_t>((out_band - 1) * stride - before + kernel - band, 0);
  if (before > band || after > band)
    return fmt::format("{}: its input's {} {} are cut into bands of {} by mesh dim '{}', narrower than the {}-wide "
                       "window's halo",
                       op, extent, axis_name, band, spec, kernel);
  return {};
}

WindowPlan plan_window(const char* op, const DTensor& x, int axis, int64_t kernel, int64_t stride, Padding padding) {
  const int64_t extent = x.global_shape()[axis];
  DTRAIN_CHECK(kernel >= 1 && stride >= 1, "[{}] window {} with stride {} on {}", op, kernel, stride, x.describe());
  WindowPlan plan;
  plan.global_out = window_output_extent(extent, kernel, stride, padding);
  DTRAIN_CHECK(plan.global_out > 0, "[{}] {}-wide window does not fit axis {} of {} with valid padding", op, a_number(kernel),
               axis, x.describe());
  const int64_t pad = padding == Padding::Same ? same_padding_before(extent, plan.global_out, kernel, stride) : 0;
  plan.dim = x.layout().dim_at(axis);
  const int parts = x.layout().num_shards(axis);
  const int64_t band = extent / parts;
  if (parts == 1) {
    plan.window = {extent, plan.global_out, kernel, stride, pad, 0, extent};
    return plan;
  }
  const std::string problem =
      window_band_problem(op, axis, extent, parts, x.layout().spec(axis), kernel, stride, padding);
  DTRAIN_CHECK(problem.empty(), "[{}] {} (x: {})", op, problem, x.describe());
  const int64_t out_band = plan.global_out / parts;
  plan.before = pad;
  plan.after = std::max<int64_t>((out_band - 1) * stride - pad + kernel - band, 0);
  const Group& group = current_device().group_along(plan.dim);
  const int64_t in = plan.before + band + plan.after;
  const int64_t lo = group.index == 0 ? plan.before : 0;
  const int64_t hi = group.index == group.size() - 1 ? plan.before + band : in;
  plan.window = {in, out_band, kernel, stride, 0, lo, hi};
  return plan;
}

Tensor extend_with_halo(const Tensor& local, int axis, const WindowPlan& plan) {
  if (plan.before == 0 && plan.after == 0) return local;
  const int64_t band = local.dim(axis);
  Tensor out(with_extent(local.shape(), axis, plan.before + band + plan.after), local.place());
  insert_block(out, at(local.rank(), axis, plan.before), local, false);

  const Group& group = current_device().group_along(plan.dim);
  const int me = group.index;
  const bool has_prev = me > 0, has_next = me < group.size() - 1;
  const int64_t count = std::max(plan.before, plan.after) * (local.size() / band);
  Tensor send({group.size() * count}, local.place()), recv = Tensor::uninitialized({group.size() * count}, local.place());
  const Shape origin(local.rank(), 0);
  // My first `after` rows are the previous band's after-halo; my last `before` rows the next band's before-halo.
  if (has_prev && plan.after > 0) {
    Tensor to = chunk(send, me - 1, count, local, axis, plan.after);
    insert_block(to, origin, slice_block(local, origin, to.shape()), false);
  }
  if (has_next && plan.before > 0) {
    Tensor to = chunk(send, me + 1, count, local, axis, plan.before);
    insert_block(to, origin, slice_block(local, at(local.rank(), axis, band - plan.before), to.shape()), false);
  }
  current_device().comm->neighbour_exchange(group, view_of(send), view_of(recv));
  if (has_prev && plan.before > 0)
    insert_block(out, origin, chunk(recv, me - 1, count, local, axis, plan.before), false);
  if (has_next && plan.after > 0)
    insert_block(out, at(local.rank(), axis, plan.before + band), chunk(recv, me + 1, count, local, axis, plan.after),
                 false);
  return out;
}

Tensor fold_halo(const Tensor& extended_grad, int axis, const WindowPlan& plan) {
  if (plan.before == 0 && plan.after == 0) return extended_grad;
  const int rank = extended_grad.rank();
  const int64_t band = extended_grad.dim(axis) - plan.before - plan.after;
  Tensor out = slice_block(extended_grad, at(rank, axis, plan.before), with_extent(extended_grad.shape(), axis, band));

  const Group& group = current_device().group_along(plan.dim);
  const int me = group.index;
  const bool has_prev = me > 0, has_next = me < group.size() - 1;
  const int64_t count = std::max(plan.before, plan.after) * (out.size() / band);
  Tensor send({group.size() * count}, out.place()), recv = Tensor::uninitialized({group.size() * count}, out.place());
  const Shape origin(rank, 0);
  // The before-halo's gradient belongs to the previous band, the after-halo's to the next.
  if (has_prev && plan.before > 0) {
    Tensor to = chunk(send, me - 1, count, out, axis, plan.before);
    insert_block(to, origin, slice_block(extended_grad, origin, to.shape()), false);
  }
  if (has_next && plan.after > 0) {
    Tensor to = chunk(send, me + 1, count, out, axis, plan.after);
    insert_block(to, origin, slice_block(extended_grad, at(rank, axis, plan.before + band), to.shape()), false);
  }
  current_device().comm->neighbour_exchange(group, view_of(send), view_of(recv));
  if (has_next && plan.before > 0)  // the next band's before-halo: my last rows
    insert_block(out, at(rank, axis, band - plan.before), chunk(recv, me + 1, count, out, axis, plan.before), true);
  if (has_prev && plan.after > 0)  // the previous band's after-halo: my first rows
    insert_block(out, origin, chunk(recv, me - 1, count, out, axis, plan.after), true);
  return out;
}

}  // namespace dtrain::ops

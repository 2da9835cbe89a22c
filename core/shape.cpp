#include "core/shape.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dtrain {

std::string shape_string(const Shape& shape) { return fmt::format("({})", fmt::join(shape, ",")); }

}  // namespace dtrain

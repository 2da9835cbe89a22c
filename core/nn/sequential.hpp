// The name models had before they were graphs: a stack is the graph whose layers each take the one before.
#pragma once
#include "core/nn/model.hpp"

namespace dtrain::nn {
using Sequential = Model;
}

#include "core/error.hpp"
#include "core/nn/layer.hpp"

namespace dtrain::nn {

void Parameters::add(const std::string& path, Var var) {
  DTRAIN_CHECK(vars_.emplace(path, std::move(var)).second, "[parameters] variable '{}' exists already", path);
  paths_.push_back(path);
}

Var& Parameters::at(const std::string& path) {
  auto it = vars_.find(path);
  DTRAIN_CHECK(it != vars_.end(), "[parameters] no variable '{}'", path);
  return it->second;
}

const Var& Parameters::at(const std::string& path) const { return const_cast<Parameters*>(this)->at(path); }

}  // namespace dtrain::nn

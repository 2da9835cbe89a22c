// The golden files tests/golden/make_*_golden.py write from real Keras: one record a line, its first word the
// kind ("case NAME ...", "tensor NAME RANK D0 .. D{RANK-1} V0 V1 ...", and kinds of each file's own).
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>

#include "core/tensor.hpp"

namespace dtrain::testing {

// Calls on_line(kind, the line's other fields, the line) for each line of tests/golden/FILE.
inline void read_golden_lines(const std::string& file,
                              const std::function<void(const std::string&, std::istringstream&, const std::string&)>& on_line) {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "golden" / file;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, path.string());
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    on_line(kind, fields, line);
  }
}

// A "tensor" line's fields after its kind: the name and the values in the shape it gives.
inline std::pair<std::string, Tensor> read_golden_tensor(std::istringstream& fields) {
  std::string name;
  int rank = 0;
  fields >> name >> rank;
  Shape shape(size_t(std::max(rank, 0)), 0);
  for (int a = 0; a < rank; ++a) fields >> shape[size_t(a)];
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) fields >> t[i];
  REQUIRE_MESSAGE(fields, name);
  return {name, t};
}

}  // namespace dtrain::testing

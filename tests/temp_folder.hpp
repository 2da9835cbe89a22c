// A fresh empty folder for one test, under the system temp dir and unique to this process and name;
// removed when the test leaves its scope, pass or fail.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace dtrain::testing {

struct TempFolder {
  std::filesystem::path path;

  explicit TempFolder(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("dtrain_test_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);  // a leftover of an earlier process with the same pid
    std::filesystem::create_directories(path);
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  std::string str() const { return path.string(); }
  std::filesystem::path operator/(const std::string& child) const { return path / child; }
};

}  // namespace dtrain::testing

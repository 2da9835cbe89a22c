// Folders a run will write: output_dir_problem says why one cannot be made (a name too long, a file on the
// way, a folder not writable) without creating anything; path_text keeps a path in a message short.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/output_dir.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A fresh folder under the temp dir, removed at the end.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dtrain_output_dir_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    fs::permissions(path, fs::perms::owner_all, ignored);
    fs::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("path_text: short paths as they are, long ones cut to their head and tail, control characters escaped") {
  CHECK(path_text("runs/mnist/ckpt") == "runs/mnist/ckpt");
  const std::string long_path = "runs/" + std::string(300, 'r') + "/ckpt";
  CHECK(path_text(long_path) == "runs/" + std::string(35, 'r') + "..." + std::string(15, 'r') + "/ckpt (310 characters)");
  CHECK(path_text("a\nb") == "a\\x0ab");
}

TEST_CASE("output_dir_problem: a name too long, a file on the way, a folder not writable; nothing is created") {
  TempDir temp;
  CHECK(output_dir_problem((temp.path / "run" / "ckpt").string()).empty());
  CHECK(output_dir_problem(temp.path.string()).empty());

  const std::string too_long = (temp.path / std::string(300, 'r') / "ckpt").string();
  const std::string why = output_dir_problem(too_long);
  CHECK(contains(why, "a name in it is 300 characters long"));
  CHECK(why.size() < 120);  // the path is not echoed whole
  const std::string deep = (temp.path / std::string(5000, 'd')).string();
  CHECK(contains(output_dir_problem(deep), "characters long"));

  std::ofstream(temp.path / "afile") << "x";
  const std::string under_file = output_dir_problem((temp.path / "afile" / "sub" / "ckpt").string());
  CHECK(contains(under_file, "afile' is a file, not a folder"));
  CHECK(contains(output_dir_problem((temp.path / "afile").string()), "is a file, not a folder"));

  // Permissions stop everyone but root (the e2e tests use a read-only mount for root).
  if (::geteuid() != 0) {
    fs::create_directories(temp.path / "locked");
    fs::permissions(temp.path / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK(contains(output_dir_problem((temp.path / "locked" / "run").string()), "locked' is not writable"));
  }
  // Only what the test made is there.
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(temp.path)) ++entries;
  CHECK(entries == (::geteuid() != 0 ? 2 : 1));
}

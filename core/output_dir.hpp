// A folder dtrain will write (a run dir, a checkpoint dir): how a message names it, and whether it can be made
// and written, asked before anything is created so a refused path leaves nothing behind.
#pragma once
#include <string>

namespace dtrain {

// A path as messages show it, on one line and short: control characters escaped, and one longer than 64
// characters cut to its first 40 and last 20 ("runs/aaaa...aaaa/ckpt (300 characters)").
std::string path_text(const std::string& path);

// Why `dir` cannot be created (with its missing parents) and written, or "" when it can: a name in it longer
// than the file system allows, a path over PATH_MAX, a part of it that is a file, a folder that is not
// writable (a read-only mount; permissions too, except for root, whom they do not stop). Creates nothing.
std::string output_dir_problem(const std::string& dir);

}  // namespace dtrain

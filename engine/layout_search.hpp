// `dtrain plan --search`: other meshes and layouts for the config's devices, ranked by the step time plan
// predicts for them (engine/step_time.hpp, each candidate's own dry step), those that fit in memory only.
// Candidates: every factorization of the device count over the config's mesh dims (and a `model` dim when
// the config has none); for each, the weights' layouts found by coordinate descent from the config's own
// (each kernel of rank >= 2 replicated or one axis sharded over one dim the data layout leaves free); a
// candidate that does not fit tries accumulation (2, 4 micro-batches). ZeRO-1 is not a choice: the optimizer
// shards every update it can. Each candidate is printed as the --set lines that make it.
#pragma once
#include <string>
#include <vector>

#include "engine/calibration.hpp"

namespace dtrain {

struct SearchCandidate {
  std::vector<std::string> overrides;  // --set lines beyond the config's own
  std::string mesh;                    // "{batch: 4, model: 2}"
  double step_seconds = 0, examples_per_second = 0, peak_bytes_per_process = 0;
  bool fits = true;
};

struct SearchResult {
  SearchCandidate config;                // the config as given
  std::vector<SearchCandidate> best;     // the fastest that fit, fastest first
  int evaluated = 0, refused = 0;        // candidates planned; those the engine refused (indivisible, ...)
};

// `overrides`: the command line's --set lines; `processes`: as plan --processes (0: one).
SearchResult search_layouts(const std::string& config_path, const std::vector<std::string>& overrides, int processes,
                            const Calibration& calibration, int keep = 5);

}  // namespace dtrain

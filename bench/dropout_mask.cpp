// Cost of the CPU dropout mask kernel (CpuDropout::mask) on the IMDB embedding's activations: a whole
// [N, 500, 16] block, a column shard [N, 500, 8] at column 8 (a {batch, model}-style split of the last axis)
// and an odd row length [N, 500, 15] (groups of four cut at every row). Prints one JSON line per block:
// nanoseconds per element and milliseconds per call, the median (and min) of --repeats calls.
//   bench_dropout_mask [--batch 64] [--rate 0.2] [--repeats 31]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "core/kernels/dropout/dropout.hpp"
#include "core/random.hpp"

using namespace dtrain;

namespace {

kernels::GlobalBlock block_of(const std::vector<int64_t>& global_shape, const std::vector<int64_t>& extent,
                     const std::vector<int64_t>& offset) {
  return kernels::global_block(int(global_shape.size()), global_shape.data(), extent.data(), offset.data());
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64;
  float rate = 0.2f;
  int repeats = 31;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::stol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rate")) rate = std::stof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
  }
  struct Case {
    const char* name;
    kernels::GlobalBlock block;
  };
  const Case cases[] = {{"whole [N,500,16]", block_of({batch, 500, 16}, {batch, 500, 16}, {0, 0, 0})},
                        {"columns 8..16 of [N,500,16]", block_of({batch, 500, 16}, {batch, 500, 8}, {0, 0, 8})},
                        {"whole [N,500,15]", block_of({batch, 500, 15}, {batch, 500, 15}, {0, 0, 0})}};
  const kernels::DropoutKernels& cpu = kernels::cpu_kernels<kernels::DropoutKernels>();
  for (const Case& c : cases) {
    const int64_t elements = kernels::global_block_elements(c.block);
    bench::Buffer mask{size_t(elements)};
    std::vector<double> seconds;
    double checksum = 0;
    for (int r = 0; r < repeats + 1; ++r) {  // the first call warms the pages up and is not counted
      const uint64_t key = seed_key(1000, r);
      const auto start = bench::Clock::now();
      cpu.mask(c.block, key, rate, mask.data);
      const double s = bench::seconds_since(start);
      if (r > 0) seconds.push_back(s);
      checksum += double(mask.data[elements / 3]);
    }
    const double best = *std::min_element(seconds.begin(), seconds.end());
    std::printf("{\"block\": \"%s\", \"elements\": %lld, \"rate\": %.2f, \"repeats\": %d, \"ns_per_element\": %.3f, "
                "\"ns_per_element_min\": %.3f, \"ms_per_call\": %.3f, \"checksum\": %.1f}\n",
                c.name, (long long)elements, double(rate), repeats, bench::median(seconds) * 1e9 / double(elements),
                best * 1e9 / double(elements), bench::median(seconds) * 1e3, checksum);
  }
  return 0;
}

// How fast dataset arrays delivers training batches: fill_features (the rank's rows of a shuffled batch,
// converted to floats / 255) from a mapped .npy file and from HDF5 (contiguous and chunked) datasets, MNIST's
// shape (60000 x 28 x 28 uint8). One rank reading the whole batch, and --ranks threads each reading its
// share at once (as the trainer's rank threads do; HDF5 calls are serialized by its lock). Prints one JSON
// line per case: the median rows/s over --batches batches (and microseconds per batch).
//   bench_array_read [--examples 60000] [--batch 128] [--batches 200] [--ranks 4] [--chunk_rows 32] [--dir /tmp]
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/array_source.hpp"
#include "bench/bench_util.hpp"
#include "tests/array_files.hpp"

using namespace dtrain;

namespace {

std::vector<double> batch_seconds(const ArraySource& source, int64_t batch, int64_t batches, int ranks) {
  const std::vector<int64_t> order = source.order(0);
  const int64_t width = num_elements(source.example_shape());
  std::vector<std::vector<float>> out(size_t(ranks), std::vector<float>(size_t(batch / ranks * width)));
  std::vector<double> seconds;
  for (int64_t b = 0; b < batches; ++b) {
    const std::span<const int64_t> ids(order.data() + (b * batch) % (int64_t(order.size()) - batch), size_t(batch));
    const auto start = bench::Clock::now();
    const int64_t share = batch / ranks;
    if (ranks == 1) {
      source.fill_features(ids, 0, batch, 0, width, out[0].data());
    } else {
      // Timed from when all threads are running (a barrier) to the last one's end: not the threads' start.
      std::barrier ready(ranks);
      std::vector<bench::Clock::time_point> begun(static_cast<size_t>(ranks)), ended(static_cast<size_t>(ranks));
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
          ready.arrive_and_wait();
          begun[size_t(r)] = bench::Clock::now();
          source.fill_features(ids, r * share, (r + 1) * share, 0, width, out[size_t(r)].data());
          ended[size_t(r)] = bench::Clock::now();
        });
      for (std::thread& thread : threads) thread.join();
      seconds.push_back(std::chrono::duration<double>(*std::max_element(ended.begin(), ended.end()) -
                                                      *std::min_element(begun.begin(), begun.end())).count());
      continue;
    }
    seconds.push_back(bench::seconds_since(start));
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t examples = 60000, batch = 128, batches = 200;
  int ranks = 4;
  int64_t chunk_rows = 32;
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--examples") examples = std::stoll(argv[i + 1]);
    else if (flag == "--batch") batch = std::stoll(argv[i + 1]);
    else if (flag == "--batches") batches = std::stoll(argv[i + 1]);
    else if (flag == "--ranks") ranks = std::stoi(argv[i + 1]);
    else if (flag == "--chunk_rows") chunk_rows = std::stoll(argv[i + 1]);
    else if (flag == "--dir") dir = argv[i + 1];
    else return std::fprintf(stderr, "unknown flag %s\n", argv[i]), 2;
  }
  const std::string folder = dir + "/bench_array_read_" + std::to_string(::getpid());
  std::filesystem::create_directories(folder);
  std::vector<uint8_t> pixels(size_t(examples * 784));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t(i * 2654435761u >> 24);
  const std::vector<int32_t> labels(size_t(examples), 0);
  testing::write_npy(folder + "/x.npy", "|u1", {examples, 28, 28}, pixels);
  testing::write_hdf5(folder + "/x.h5", "/contiguous", H5T_NATIVE_UINT8, {examples, 28, 28}, pixels, true);
  testing::write_hdf5(folder + "/x.h5", "/chunked", H5T_NATIVE_UINT8, {examples, 28, 28}, pixels, false, chunk_rows);
  pixels = {};
  struct Case {
    const char* name;
    std::string entry;
    std::string location;
  };
  for (const Case& c : {Case{"npy_mmap", "x.npy", folder}, Case{"hdf5_contiguous", "/contiguous", folder + "/x.h5"},
                        Case{"hdf5_chunked", "/chunked", folder + "/x.h5"}}) {
    std::shared_ptr<const data::ArrayFile> features = data::open_array(c.location, c.entry);
    const ArraySource source(features, 0, labels, {28, 28}, 255.0f, true, 1);
    batch_seconds(source, batch, 5, 1);  // warm: the file in the page cache
    for (int threads : {1, ranks}) {
      const double median = bench::median(batch_seconds(source, batch, batches, threads));
      std::printf("{\"case\": \"%s\", \"batch\": %lld, \"rank_threads\": %d, \"rows_per_s\": %.0f, \"us_per_batch\": %.1f%s}\n",
                  c.name, (long long)batch, threads, double(batch) / median, median * 1e6,
                  c.entry == "/chunked" ? fmt::format(", \"chunk_rows\": {}", chunk_rows).c_str() : "");
    }
  }
  std::filesystem::remove_all(folder);
  return 0;
}

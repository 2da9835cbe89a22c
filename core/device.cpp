// The current rank's context (thread-local) and run_spmd, which runs one program instance per mesh rank.
#include "core/device.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "core/comm/local.hpp"
#include "core/error.hpp"

namespace dtrain {
namespace {

thread_local DeviceContext* current = nullptr;

}  // namespace

Group DeviceContext::group(const std::vector<std::string>& dims) const {
  DTRAIN_CHECK(mesh, "[device] the device context has no mesh");
  Group result;
  result.ranks = mesh->group(rank, dims);
  result.index = int(std::find(result.ranks.begin(), result.ranks.end(), rank) - result.ranks.begin());
  return result;
}

DeviceContext& current_device() {
  DTRAIN_CHECK(current != nullptr, "[device] no current device: ops must run inside run_spmd");
  return *current;
}

ScopedDevice::ScopedDevice(DeviceContext& context) : previous_(current) { current = &context; }

ScopedDevice::~ScopedDevice() { current = previous_; }

void run_spmd(const MeshPtr& mesh, const std::function<void(DeviceContext&)>& fn) {
  DTRAIN_CHECK(mesh, "[device] run_spmd needs a mesh");
  const int size = mesh->size();
  LocalWorld world(size);

  if (size == 1) {  // nothing to wait for: run in the calling thread, errors propagate as they are
    auto comm = world.communicator(0);
    DeviceContext context{mesh, 0, comm.get()};
    ScopedDevice scope(context);
    fn(context);
    return;
  }

  std::mutex mutex;
  std::exception_ptr first_error;  // the first failure; the "aborted" errors it causes in peers come later
  auto fail = [&](std::exception_ptr error, const std::string& where) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& caught) {
      what = caught.what();
    } catch (...) {
    }
    {
      std::lock_guard lock(mutex);
      if (!first_error) first_error = error;
    }
    // Recorded before aborting, so an error the abort causes elsewhere can never be the first.
    world.abort(fmt::format("{} failed: {}", where, what));
  };

  std::vector<std::thread> threads;
  threads.reserve(size);
  try {
    for (int rank = 0; rank < size; ++rank) {
      threads.emplace_back([&, rank, comm = world.communicator(rank)] {
        try {
          DeviceContext context{mesh, rank, comm.get()};
          ScopedDevice scope(context);
          fn(context);
        } catch (...) {
          fail(std::current_exception(), fmt::format("rank {}", rank));
        }
      });
    }
  } catch (...) {  // could not start every thread: stop those that started
    fail(std::current_exception(), "starting the rank threads");
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace dtrain

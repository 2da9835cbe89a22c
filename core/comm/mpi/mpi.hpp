// The process layer: what dtrain needs from MPI when a mesh is spread over `mpirun -np P` processes.
// Built when DTRAIN_WITH_MPI is on; otherwise core/comm/mpi/no_mpi.cpp provides the same functions for a
// single process (and says dtrain was built without MPI when asked for more).
//
// Collectives between processes are non-blocking MPI calls waited for by polling: a blocking call made in
// a fiber would stall every fiber of its OS thread, and two processes whose blocked fibers wait on
// different groups would deadlock. MPI is initialized MPI_THREAD_SERIALIZED and every call is made under
// one process-wide lock, so fibers on any thread may call.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/transport.hpp"

namespace dtrain {

// True when this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...).
bool mpi_launched();

// Initializes MPI when launched by mpirun (once; finalized at a normal exit). Without mpirun, or in a
// build without MPI, the run is one process and nothing happens.
void initialize_processes();
int process_index();  // this process's MPI rank (0 without mpirun)
int process_count();  // MPI world size (1 without mpirun)
// The host process `p` runs on (MPI_Get_processor_name, gathered at start-up), and how many distinct hosts the
// job spans: messages name a process's host when a job spans several.
const std::string& process_host(int p);
int host_count();
// "processes 0,1 on host a" or "processes 0-3 on hosts a (0,1), b (2,3)": the hosts of `processes`, for messages.
std::string describe_processes(const std::vector<int>& processes);
// Cores this process may use: the machine's cores shared by the processes mpirun put on this node.
int process_cores();

// Returns once every process of the job has called it (outside run_spmd: the commands' own steps).
void barrier_processes();
// Process 0's `value`, on every process (collective, like barrier_processes).
std::string first_process_value(const std::string& value);

// Ends every process of the job with `code` (MPI_Abort) when there are several; returns otherwise. The
// caller prints its message first: after this nothing more is printed.
void abort_processes(int code);

// Called by a process that failed with `message`: whether every process of the job failed with the same
// message within `grace_seconds` (a config or data error that each meets alike). Then process 0 alone
// should print it, and every process may end normally with the same code (no MPI_Abort: mpirun's abort
// banners and "ORTE_ERROR_LOG" lines say nothing useful). False with one process, or when any process did
// not fail alike in time: the caller prints, naming itself, and aborts the job.
bool failed_alike(const std::string& message, double grace_seconds = 3.0);

// How long a process waits in a collective for its peers before it gives up with an error (config
// comm.timeout_s): a peer that is stuck or gone turns into a message, never a hang.
void set_collective_timeout(double seconds);
// The limit set last (300 s until set): the NCCL watchdog honours it too.
double collective_timeout();

// Non-blocking collectives among a fixed list of processes, one MPI communicator (made once, at creation):
// the MPI transport (transport.hpp), on host buffers. Each call returns when the operation is complete;
// meanwhile the calling fiber polls and lets the other fibers of its thread run. A wait longer than the
// collective timeout throws an Error naming the group. Counts are per process.
class ProcessGroup : public Transport {
 public:
  // Watched while waiting (may be null): set when this process's run failed; the wait then throws.
  const std::atomic<bool>* stop = nullptr;
  std::string name() const override { return "mpi"; }
  Place place() const override { return Place::cpu(); }
};

// A communicator over `processes` (ascending MPI ranks, this one among them). Collective over those
// processes: every process of the list must create its groups in the same order.
// `name` says which group it serves, for messages.
std::unique_ptr<ProcessGroup> make_process_group(const std::vector<int>& processes, std::string name);

}  // namespace dtrain

// `dtrain elastic --hostfile FILE [--min-hosts K] [--max-restarts N] [--mpirun CMD] -- train|resume ARGS`:
// runs the command under mpirun on the hostfile's hosts (each host's slots processes). When the job fails
// because a host was lost (mpirun names it: its daemon is gone or unreachable), that host is dropped, the
// mesh is planned again for the processes left (every dim but the batch dim kept, the global batch kept,
// at most as many devices per process as before, and as many micro-batches a step as it needs to fit the
// memory: fitting_accumulation) and the run resumes from its last committed checkpoint,
// until it completes, fewer than K hosts remain, or N restarts were made. A failure that names no host
// restarts on the same hosts (also counted); a config or usage error (exit 2) ends at once. Restarts back
// off (1, 2, 4, ... 30 s). Each restart is a console line here and, written by the resumed run, a "run" row in
// metrics.jsonl with its cause and hosts (DTRAIN_ELASTIC_CAUSE and DTRAIN_ELASTIC_RESTART reach it through
// mpirun -x).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "app/commands.hpp"
#include "core/checkpoint/format.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/error.hpp"
#include "engine/elastic_plan.hpp"
#include "engine/memory_plan.hpp"

namespace dtrain {
namespace {

// How long a host may take to start a probe's process before it counts as gone.
constexpr double kProbeSeconds = 20;

std::atomic<int> child_pid{0};
std::atomic<int> stop_signal{0};

void forward_signal(int signal) {
  stop_signal = signal;
  if (const int pid = child_pid.load(); pid > 0) kill(pid, signal);
}

// The inner command's options elastic needs to read its config, and to turn it into a `resume`.
struct InnerCommand {
  std::string command;  // train | resume
  std::string config, run_dir, from;
  std::vector<std::string> sets;
  bool overwrite = false;
  std::string profile{};  // --profile START:STEPS, kept by the resume of a restart
};

InnerCommand parse_inner(const std::vector<std::string>& args) {
  DTRAIN_CHECK_USAGE(!args.empty() && (args[0] == "train" || args[0] == "resume"),
                     "elastic: give the command after --: `dtrain elastic --hostfile FILE -- train --config C` (train "
                     "or resume){}",
                     args.empty() ? "" : fmt::format(", not '{}'", args[0]));
  InnerCommand inner{args[0], "", "", "", {}, false};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& word = args[i];
    // The value of `--name VALUE` or `--name=VALUE` (also under `alias`), or nothing when `word` is neither.
    const auto value = [&](const std::string& name, const std::string& alias = "") -> std::optional<std::string> {
      for (const std::string& option : {name, alias}) {
        if (option.empty()) continue;
        if (word == option) {
          DTRAIN_CHECK_USAGE(i + 1 < args.size(), "elastic: {} after -- needs a value", option);
          return args[++i];
        }
        if (word.rfind(option + "=", 0) == 0) return word.substr(option.size() + 1);
      }
      return std::nullopt;
    };
    if (auto v = value("--config", "-c")) inner.config = *v;
    else if (auto v = value("--set")) inner.sets.push_back(*v);
    else if (auto v = value("--run-dir")) inner.run_dir = *v;
    else if (auto v = value("--from")) inner.from = *v;
    else if (auto v = value("--profile")) inner.profile = *v;
    else if (word == "--overwrite") inner.overwrite = true;
  }
  DTRAIN_CHECK_USAGE(!inner.config.empty(), "elastic: the {} command after -- needs --config FILE", inner.command);
  return inner;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream stream(text);
  return {std::istream_iterator<std::string>(stream), std::istream_iterator<std::string>()};
}

// A new empty file under /tmp named PREFIX-XXXXXX; its path.
std::string temporary_file(const char* prefix) {
  std::string path = fmt::format("/tmp/{}-XXXXXX", prefix);
  const int fd = mkstemp(path.data());
  DTRAIN_CHECK(fd >= 0, "elastic: cannot make a temporary file in /tmp: {}", std::strerror(errno));
  close(fd);
  return path;
}

// In a forked child: runs `argv` in place of this process (exit 127 when it cannot).
[[noreturn]] void exec_child(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "elastic: cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// Runs `argv`, its stdout and stderr copied to this stdout as they come (unless !echo); returns the exit code
// (128 + signal when killed) and keeps the output's last megabyte in `output`.
int run_child(const std::vector<std::string>& argv, std::string& output, bool echo = true) {
  int pipe_ends[2];
  DTRAIN_CHECK(pipe(pipe_ends) == 0, "elastic: pipe failed: {}", std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  DTRAIN_CHECK(pid >= 0, "elastic: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    dup2(pipe_ends[1], 1);
    dup2(pipe_ends[1], 2);
    close(pipe_ends[0]);
    close(pipe_ends[1]);
    exec_child(argv);
  }
  child_pid = pid;
  close(pipe_ends[1]);
  char buffer[65536];
  for (ssize_t got; (got = read(pipe_ends[0], buffer, sizeof buffer)) != 0;) {
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (echo) {
      std::fwrite(buffer, 1, size_t(got), stdout);
      std::fflush(stdout);
    }
    output.append(buffer, size_t(got));
    if (output.size() > (size_t(2) << 20)) output.erase(0, output.size() - (size_t(1) << 20));
  }
  close(pipe_ends[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_pid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The hosts of `hosts` on which mpirun starts a process within `limit_s`, probed in parallel: a host whose
// link is down would leave mpirun waiting for its daemon forever. A probe still running at the limit is
// killed with its whole process group (mpirun, the agent and what the agent started).
std::vector<elastic::Host> reachable(const std::vector<std::string>& mpirun, const std::vector<elastic::Host>& hosts,
                                     double limit_s) {
  struct Probe {
    pid_t pid = -1;
    std::string hostfile;
    bool ok = false;
  };
  std::vector<Probe> probes(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    probes[i].hostfile = temporary_file("dtrain-elastic-probe");
    std::ofstream(probes[i].hostfile) << hosts[i].name << " slots=1\n";
    std::vector<std::string> argv = mpirun;
    argv.insert(argv.end(), {"--hostfile", probes[i].hostfile, "-np", "1", "true"});
    std::fflush(stdout);
    const pid_t pid = fork();
    DTRAIN_CHECK(pid >= 0, "elastic: fork failed: {}", std::strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      exec_child(argv);
    }
    setpgid(pid, pid);
    probes[i].pid = pid;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  for (size_t left = probes.size(); left > 0 && std::chrono::steady_clock::now() < deadline;) {
    left = 0;
    for (Probe& probe : probes) {
      if (probe.pid < 0) continue;
      int status = 0;
      if (waitpid(probe.pid, &status, WNOHANG) == probe.pid) {
        probe.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        probe.pid = -1;
      } else {
        ++left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<elastic::Host> up;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (probes[i].pid > 0) {
      kill(-probes[i].pid, SIGKILL);
      waitpid(probes[i].pid, nullptr, 0);
    }
    std::remove(probes[i].hostfile.c_str());
    if (probes[i].ok) up.push_back(hosts[i]);
  }
  return up;
}

// Accumulation makes up what a smaller mesh cannot hold: the fewest micro-batches a step, from the config's own count
// up by doubling while they divide each device's batch, whose plan for the relaunch (`dtrain plan --json` for its
// mesh and process count, run as a child of this process) fits the memory this machine has (or
// $DTRAIN_MEMORY_LIMIT): the hosts are taken to be alike. The config's own count when none fits: the run's memory
// check then refuses it, naming the bytes (exit 2).
int64_t fitting_accumulation(const std::string& self, const InnerCommand& inner, const Config& config,
                         const elastic::Relaunch& launch, const std::string& batch_dim) {
  int64_t batch_devices = 1;
  for (const MeshDimConfig& dim : launch.dims)
    if (dim.name == batch_dim) batch_devices = dim.size;
  const int64_t device_batch = config.data.batch_size / std::max<int64_t>(1, batch_devices);
  const int64_t own = std::max<int64_t>(1, config.train.accumulation_steps);
  for (int64_t steps = own; steps <= device_batch && device_batch % steps == 0; steps *= 2) {
    std::vector<std::string> argv{self, "plan", "--config", inner.config};
    for (const std::string& set : inner.sets) argv.insert(argv.end(), {"--set", set});
    argv.insert(argv.end(), {"--set", "mesh.dims=" + elastic::dims_text(launch.dims), "--set",
                             fmt::format("train.accumulation_steps={}", steps), "--processes",
                             std::to_string(launch.processes), "--json"});
    std::string output;
    run_child(argv, output, false);
    if (output.find("\"fits\": true") != std::string::npos) return steps;
  }
  return own;
}

// ", accumulation 2 (to fit)" when the relaunch accumulates more than the config says.
std::string accumulation_text(const Config& config, int64_t accumulation) {
  return accumulation == config.train.accumulation_steps ? ""
                                                         : fmt::format(", accumulation {} (to fit)", accumulation);
}

std::string host_names(const std::vector<elastic::Host>& hosts) {
  std::vector<std::string> names;
  for (const elastic::Host& host : hosts) names.push_back(host.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

int run_elastic(const CommandOptions& options) {
  DTRAIN_CHECK_USAGE(!mpi_launched(), "elastic starts mpirun itself: run it without mpirun");
  std::vector<elastic::Host> hosts = elastic::read_hostfile(options.hostfile);
  DTRAIN_CHECK_USAGE(options.min_hosts >= 1 && size_t(options.min_hosts) <= hosts.size(),
                     "elastic: --min-hosts {} must be 1..{} (the hostfile's hosts)", options.min_hosts, hosts.size());
  DTRAIN_CHECK_USAGE(options.max_restarts >= 0, "elastic: --max-restarts must be >= 0, not {}", options.max_restarts);
  const InnerCommand inner = parse_inner(options.elastic_args);
  // The config as the job will read it: a bad one stops here, with its FILE:LINE:COL.
  const Config config = load_config(inner.config, LoadOptions{inner.sets, inner.run_dir, true, "", {}, inner.profile});
  const std::vector<std::string> mpirun = split_words(options.mpirun);
  DTRAIN_CHECK_USAGE(!mpirun.empty(), "elastic: --mpirun is empty");
  // The job as the hostfile intends it: the most of its slots that share the mesh's devices evenly. Later
  // launches give no process more devices than that.
  const int devices = config.mesh.num_devices();  // an auto dim counts 1 here (one process): unused then
  const int devices_per_process = devices / elastic::processes_for(devices, elastic::slot_count(hosts));
  const std::string batch_dim = elastic::batch_dim_of(config);
  const std::string checkpoints = config.checkpoint.dir;
  const std::string latest_before = checkpoint::pointer_name(checkpoints, checkpoint::kLatestFile);
  const bool dir_was_empty = !checkpoint::is_nonempty_dir(checkpoints);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();

  const std::string hostfile_path = temporary_file("dtrain-elastic-hosts");
  struct Remove {
    const std::string& path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_hostfile{hostfile_path};
  std::signal(SIGINT, forward_signal);
  std::signal(SIGTERM, forward_signal);
  setenv("DTRAIN_ELASTIC_CAUSE", "", 1);  // forwarded by mpirun -x at every launch: set, so it is never unset
  setenv("DTRAIN_ELASTIC_RESTART", "0", 1);

  std::vector<std::string> lost;  // named by mpirun's output after a failed launch
  std::string cause;              // why the next launch is a restart ("" for the first)
  for (int restart = 0;; ++restart) {
    // The hosts left: those not named lost, and answering a probe.
    std::vector<elastic::Host> named_left;
    for (const elastic::Host& host : hosts)
      if (std::find(lost.begin(), lost.end(), host.name) == lost.end()) named_left.push_back(host);
    const std::vector<elastic::Host> answering = reachable(mpirun, named_left, kProbeSeconds);
    for (const elastic::Host& host : named_left) {
      if (std::none_of(answering.begin(), answering.end(), [&](const elastic::Host& h) { return h.name == host.name; }))
        cause += fmt::format("{}host {} does not answer (no process started there within {} s)",
                             cause.empty() ? "" : "; ", host.name, kProbeSeconds);
    }
    const bool shrunk = answering.size() < hosts.size();
    hosts = answering;
    if (hosts.size() < size_t(options.min_hosts)) {
      fmt::print(stderr, "dtrain elastic: {}; {} host(s) left ({}), fewer than --min-hosts {}: stopping\n", cause,
                 hosts.size(), host_names(hosts), options.min_hosts);
      return 1;
    }
    if (restart > options.max_restarts) {
      fmt::print(stderr, "dtrain elastic: {}; stopping after {} restart(s) (--max-restarts {})\n", cause, restart - 1,
                 options.max_restarts);
      return 1;
    }
    // A mesh with an auto dim sizes itself by the processes; any other is planned again here.
    const int auto_processes = elastic::auto_processes(config.mesh.dims, batch_dim, config.data.batch_size,
                                                       elastic::slot_count(hosts), config.train.bitwise);
    const elastic::Relaunch launch =
        auto_processes > 0 ? elastic::Relaunch{elastic::auto_sized(config.mesh.dims, auto_processes), auto_processes}
                           : elastic::replan_mesh(config.mesh.dims, batch_dim, config.data.batch_size,
                                                  devices_per_process, elastic::slot_count(hosts), config.train.bitwise);
    const std::vector<elastic::Host> used = elastic::spread(hosts, launch.processes);
    std::vector<std::string> args = options.elastic_args;
    std::string from = "starting";
    int64_t accumulation = config.train.accumulation_steps;
    if (restart > 0 || shrunk) {
      const std::string latest = checkpoint::pointer_name(checkpoints, checkpoint::kLatestFile);
      const bool committed = !latest.empty() && (inner.command == "resume" || latest != latest_before);
      if (committed) {  // this run's own checkpoint: resume it
        args = {"resume", "--config", inner.config};
        for (const std::string& set : inner.sets) args.insert(args.end(), {"--set", set});
        if (!inner.run_dir.empty()) args.insert(args.end(), {"--run-dir", inner.run_dir});
        if (inner.overwrite) args.push_back("--overwrite");
        if (!inner.profile.empty()) args.insert(args.end(), {"--profile", inner.profile});
        from = fmt::format("resuming {}/{}", checkpoints, latest);
      } else if (restart > 0) {
        // Nothing of this run was committed: a train that found the dir empty may clear its failed start's files.
        if (inner.command == "train" && dir_was_empty && !inner.overwrite) args.push_back("--overwrite");
        from = "starting again";
      }
      if (auto_processes == 0) args.insert(args.end(), {"--set", "mesh.dims=" + elastic::dims_text(launch.dims)});
      // Under train.bitwise micro-batches add to the batch's bits, but BatchNorm's statistics would be a
      // micro-batch's: such a model keeps its accumulation (and the run's memory check speaks).
      accumulation = config.train.bitwise && has_batch_norm(config)
                         ? config.train.accumulation_steps
                         : fitting_accumulation(self, inner, config, launch, batch_dim);
      if (accumulation != config.train.accumulation_steps)
        args.insert(args.end(), {"--set", fmt::format("train.accumulation_steps={}", accumulation)});
    }
    if (restart > 0) {
      const int wait_s = std::min(30, 1 << std::min(restart - 1, 5));
      fmt::print(stderr,
                 "dtrain elastic: {}; restart {} of at most {} in {} s on {} host(s) ({}), {} processes, mesh {}{}, {}\n",
                 cause, restart, options.max_restarts, wait_s, used.size(), host_names(used), launch.processes,
                 elastic::dims_text(launch.dims), accumulation_text(config, accumulation), from);
      setenv("DTRAIN_ELASTIC_CAUSE", cause.c_str(), 1);
      setenv("DTRAIN_ELASTIC_RESTART", std::to_string(restart).c_str(), 1);
      for (int waited = 0; waited < wait_s * 10 && stop_signal.load() == 0; ++waited)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (stop_signal.load() != 0) return 128 + stop_signal.load();
    } else if (shrunk) {
      fmt::print(stderr, "dtrain elastic: {}; starting on {} host(s) ({}), {} processes, mesh {}{}\n", cause, used.size(),
                 host_names(used), launch.processes, elastic::dims_text(launch.dims), accumulation_text(config, accumulation));
    }

    std::ofstream(hostfile_path) << elastic::hostfile_text(used);
    std::vector<std::string> argv = mpirun;
    for (const std::string& word : {std::string("--hostfile"), std::string(hostfile_path), std::string("-np"),
                                    std::to_string(launch.processes), std::string("-x"),
                                    std::string("DTRAIN_ELASTIC_CAUSE"), std::string("-x"),
                                    std::string("DTRAIN_ELASTIC_RESTART"), self})
      argv.push_back(word);
    if (memory_limit_bytes() > 0) argv.insert(argv.end() - 1, {"-x", "DTRAIN_MEMORY_LIMIT"});  // the plan's limit
    argv.insert(argv.end(), args.begin(), args.end());
    std::string output;
    const int code = run_child(argv, output);
    if (code == 0) {
      if (restart > 0) fmt::print("dtrain elastic: completed after {} restart(s), on {}\n", restart, host_names(used));
      return 0;
    }
    if (stop_signal.load() != 0) return 128 + stop_signal.load();
    if (code == 2) return 2;  // a config or usage error: another launch meets it again

    lost = elastic::lost_hosts(output, used);
    cause.clear();
    for (size_t i = 0; i < used.size(); ++i) {
      if (std::find(lost.begin(), lost.end(), used[i].name) != lost.end())
        cause += fmt::format("{}host {} lost (processes {})", cause.empty() ? "" : "; ", used[i].name,
                             fmt::join(elastic::ranks_of(used, i), ","));
    }
    if (lost.empty()) cause = fmt::format("the job ended with exit code {}, naming no lost host", code);
  }
}

}  // namespace dtrain

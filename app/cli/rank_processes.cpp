#include "app/cli/rank_processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "app/cli/child_logs.h"
#include "app/cli/child_signals.h"
#include "app/cli/commands.h"
#include "app/cli/pause_signals.h"
#include "app/cli/progress_format.h"
#include "engine/config/compute_dtype.h"
#include "engine/core/process_memory.h"
#include "engine/distributed/communicator.h"

namespace hh::cli {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> gCommandLine;

// A TCP port nobody listens on now (the kernel's choice for port 0); rank 0 binds it moments later.
int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("--nproc: cannot open a socket to find a free port: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("--nproc: no free TCP port on 127.0.0.1");
  return ntohs(address.sin_port);
}

// The recorded command line without `--nproc N` / `--nproc=N`.
std::vector<std::string> rankArguments() {
  std::vector<std::string> out;
  for (size_t i = 0; i < gCommandLine.size(); ++i) {
    const auto& a = gCommandLine[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void recordCommandLine(int argc, char** argv) { gCommandLine.assign(argv, argv + argc); }

void addDeviceOption(CLI::App* command, std::string& device) {
  command->add_option("--device", device,
                      "auto | cpu | cuda | cuda:N (default auto: the GPU when this build has CUDA and one is visible, "
                      "else the CPU)");
}

void addDtypeOption(CLI::App* command, std::string& dtype, const std::string& name) {
  command->add_option(name, dtype,
                      "float32 | bfloat16 | float64 (default float32): bfloat16 keeps frozen weights and activations in bf16, "
                      "what trains in fp32, softmax, normalisers, states and losses in fp32; float64 runs everything "
                      "in fp64 (slow; tells fp32 overflow from a failure of the method)")
      ->check(CLI::IsMember(jobs::computeDtypeNames()));
}

void addProcessCountOption(CLI::App* command, int& processes) {
  command->add_option("--nproc", processes,
                      "Data-parallel processes on this machine (c10d/Gloo; batch size is the global batch; "
                      "ranks > 0 log to <run-dir>/rank-K.log)")
      ->check(CLI::Range(1, 256));
}

namespace {

// Where and how the local ranks meet: the rendezvous (MASTER_ADDR and MASTER_PORT if set, else a
// file in the run folder, through which nothing listens on a network interface), the threads each
// gets, and the command line they run.
struct RankLaunch {
  int processes = 1;
  std::string runDir, self, masterAddr, masterPort, threads;
  std::string storeFile;  // the file rendezvous (HH_DIST_STORE_FILE); empty: the TCP one
  std::vector<std::string> args;
  std::vector<std::string> logs;  // per rank: rank 0's stderr (relayed at the end), the others' output
};

// A MASTER_ADDR that does not resolve would leave every rank > 0 retrying its connection until
// HH_DIST_TIMEOUT_S (and rank 0 waiting for them): refused before any rank starts.
void refuseUnresolvable(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(address.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  if (rc != 0)
    throw std::runtime_error("--nproc: MASTER_ADDR=\"" + address + "\" does not resolve (" + ::gai_strerror(rc) +
                             "): set it to the host of rank 0, or leave it unset for 127.0.0.1");
}

RankLaunch planRanks(int processes, const std::string& runDir) {
  RankLaunch launch;
  launch.processes = processes;
  launch.runDir = runDir;
  launch.self = fs::read_symlink("/proc/self/exe").string();
  const char* addrEnv = std::getenv("MASTER_ADDR");
  launch.masterAddr = addrEnv && *addrEnv ? addrEnv : "127.0.0.1";
  refuseUnresolvable(launch.masterAddr);
  const char* portEnv = std::getenv("MASTER_PORT");
  launch.masterPort = portEnv && *portEnv ? portEnv : std::to_string(freeLoopbackPort());
  if (!(addrEnv && *addrEnv) && !(portEnv && *portEnv)) {
    // Fresh: a file left by a killed launcher holds its world's keys (gloo would dial its ranks).
    launch.storeFile = (fs::path(runDir) / (".rendezvous-" + std::to_string(getpid()))).string();
    fs::remove(launch.storeFile);
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  launch.threads = std::to_string(std::max(1, static_cast<int>(cores) / processes));
  launch.args = rankArguments();
  for (int rank = 0; rank < processes; ++rank)
    launch.logs.push_back((fs::path(runDir) / (rank == 0 ? ".rank-0.stderr" : "rank-" + std::to_string(rank) + ".log")).string());
  return launch;
}

// Forks and execs every rank with its environment; pid -> rank. Rank 0 keeps stdout (the
// progress); its stderr (an error line, if any) goes to a file the launcher relays at the end, so
// a failure prints one line whichever rank failed first.
std::map<pid_t, int> forkRanks(const RankLaunch& launch) {
  std::vector<char*> argv;
  for (const auto& a : launch.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t launcher = getpid();
  const std::string launcherPid = std::to_string(launcher);
  const std::string worldSize = std::to_string(launch.processes);
  std::map<pid_t, int> running;
  for (int rank = 0; rank < launch.processes; ++rank) {
    const std::string rankText = std::to_string(rank);
    const std::string& log = launch.logs[static_cast<size_t>(rank)];
    const pid_t pid = fork();
    if (pid < 0) {
      for (const auto& [p, r] : running) kill(p, SIGKILL);
      throw std::runtime_error("--nproc: fork failed: " + std::string(std::strerror(errno)));
    }
    if (pid == 0) {  // the rank: only async-signal-safe calls matter here, then exec
      if (!detachChild(launcher, launcherPid.c_str())) _exit(130);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        if (rank > 0) dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      setenv("RANK", rankText.c_str(), 1);
      setenv("LOCAL_RANK", rankText.c_str(), 1);
      setenv("WORLD_SIZE", worldSize.c_str(), 1);
      setenv("MASTER_ADDR", launch.masterAddr.c_str(), 1);
      setenv("MASTER_PORT", launch.masterPort.c_str(), 1);
      if (!launch.storeFile.empty()) setenv("HH_DIST_STORE_FILE", launch.storeFile.c_str(), 1);
      if (!std::getenv("HH_NUM_THREADS")) setenv("HH_NUM_THREADS", launch.threads.c_str(), 1);
      execv(launch.self.c_str(), argv.data());
      _exit(127);
    }
    running[pid] = rank;
  }
  return running;
}

std::string rendezvousOf(const RankLaunch& launch) {
  return launch.storeFile.empty() ? launch.masterAddr + ":" + launch.masterPort : "file " + launch.storeFile;
}

// One line (or a JSONL event) that says what started where.
void announceRanks(const RankLaunch& launch, const std::map<pid_t, int>& running) {
  const int n = launch.processes;
  if (jsonlProgress()) {
    std::vector<int> pids;
    for (const auto& [pid, rank] : running) pids.push_back(static_cast<int>(pid));
    emitEvent({{"event", "processes"},
               {"count", n},
               {"pids", pids},
               {"rendezvous", rendezvousOf(launch)},
               {"threads", std::stoi(launch.threads)},
               {"logs", launch.runDir}});
    return;
  }
  std::printf("started %d processes (ranks 0-%d, pids", n, n - 1);
  for (const auto& [pid, rank] : running) std::printf(" %d", static_cast<int>(pid));
  std::printf("), rendezvous %s, %s thread%s each; ranks > 0 log to %s/rank-K.log\n", rendezvousOf(launch).c_str(),
              launch.threads.c_str(), launch.threads == "1" ? "" : "s", launch.runDir.c_str());
  std::fflush(stdout);
}

// How the ranks ended.
struct RanksEnd {
  int rank0Status = 0, firstFailedRank = -1, firstFailedStatus = 0;
  bool killedByLauncher = false;  // the ranks left after a failure were killed after the grace time
};

// Waits for every rank, passing each signal the launcher gets on to the ranks still running (one
// SIGINT each), and kills what still runs after a failure as rankKillDelay says (child_logs.h).
RanksEnd waitForRanks(std::map<pid_t, int> running, const ForwardedSignals& counting, const RankLaunch& launch) {
  RanksEnd end;
  int forwarded = 0;
  PauseForwarder pause;
  constexpr auto kNever = std::chrono::steady_clock::time_point::max();
  auto killAt = kNever;  // when the ranks still running are killed
  while (!running.empty()) {
    while (forwarded < counting.received()) {
      ++forwarded;
      for (const auto& [pid, rank] : running) kill(pid, SIGINT);
    }
    std::vector<pid_t> pids;
    for (const auto& [pid, rank] : running) pids.push_back(pid);
    pause.forward(pids);  // rank 0 says when they all wait, and when they go on
    if (killAt != kNever && std::chrono::steady_clock::now() >= killAt) {
      for (const auto& [pid, rank] : running) kill(pid, SIGKILL);
      end.killedByLauncher = true;
      killAt = kNever;
    }
    // Polled, not blocking: a signal that lands between the check above and a blocking wait
    // would otherwise wait for a rank to end before it is passed on.
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done == 0 || (done < 0 && errno == EINTR)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (done < 0) break;
    const auto it = running.find(done);
    if (it == running.end()) continue;
    const int rank = it->second;
    running.erase(it);
    if (rank == 0) end.rank0Status = status;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && end.firstFailedRank < 0) end.firstFailedRank = rank, end.firstFailedStatus = status;
    // Killing rank 0 while it saves after a cancel or a failure every rank agreed on lost the
    // checkpoint of a model whose save took longer than the grace time, and its run file.
    const std::string said = rank > 0 && !ok ? lastErrorLine(launch.logs[static_cast<size_t>(rank)]) : "";
    if (const auto delay = rankKillDelay(rank, status, said); delay && !running.empty())
      killAt = std::min(killAt, std::chrono::steady_clock::now() + *delay);
  }
  return end;
}

// Relays rank 0's stderr (a warning, or its one error line), or names the rank > 0 that failed
// first with the error from its log; the launcher's exit code.
int reportRanksEnd(const RanksEnd& end, const std::vector<std::string>& logs) {
  const std::string rank0Errors = readText(logs[0]);
  std::error_code ignored;
  fs::remove(logs[0], ignored);
  const bool rank0Failed = !(WIFEXITED(end.rank0Status) && WEXITSTATUS(end.rank0Status) == 0);
  const bool rank0OnItsOwn = rank0Failed && !(end.killedByLauncher && WIFSIGNALED(end.rank0Status));
  const bool rank0LostAPeer = rank0Errors.find(dist::kLostPeerMessage) != std::string::npos;
  if (end.firstFailedRank <= 0 || (rank0OnItsOwn && !rank0LostAPeer)) {
    std::fputs(rank0Errors.c_str(), stderr);
    // Killed from outside (kill -9, the OOM killer): the signal left no error line of its own.
    if (rank0OnItsOwn && WIFSIGNALED(end.rank0Status) && rank0Errors.find("hedgehog: error: ") == std::string::npos)
      std::fprintf(stderr, "hedgehog: error: rank 0 %s\n", describeStatus(end.rank0Status).c_str());
    return end.firstFailedRank < 0 ? 0 : exitCodeOf(end.rank0Status);
  }
  // A rank > 0 failed first (rank 0 saw only a lost peer, or was stopped).
  const auto& log = logs[static_cast<size_t>(end.firstFailedRank)];
  const std::string said = lastErrorLine(log);
  std::fprintf(stderr, "hedgehog: error: rank %d %s%s%s (log %s)\n", end.firstFailedRank,
               describeStatus(end.firstFailedStatus).c_str(), said.empty() ? "" : ": ", said.c_str(), log.c_str());
  if (rank0OnItsOwn) return exitCodeOf(end.rank0Status);
  return exitCodeOf(end.firstFailedStatus) == 0 ? 1 : exitCodeOf(end.firstFailedStatus);
}

}  // namespace

std::optional<int> runLocalRanks(int processes, const std::string& runDir) {
  if (processes <= 1) return std::nullopt;
  if (dist::worldFromEnvironment().distributed())
    throw std::invalid_argument("--nproc " + std::to_string(processes) +
                                " with WORLD_SIZE set: this process is already a rank of a launcher (use one or the other)");
  if (gCommandLine.empty()) throw std::logic_error("--nproc: the command line was not recorded");
  fs::create_directories(runDir);
  const auto launch = planRanks(processes, runDir);
  const ForwardedSignals counting;  // signals first, so none is lost between the forks and the wait
  const auto running = forkRanks(launch);
  announceRanks(launch, running);
  const auto end = waitForRanks(running, counting, launch);
  std::error_code ec;
  if (!launch.storeFile.empty()) fs::remove(launch.storeFile, ec);  // left behind by a rank that was killed
  return reportRanksEnd(end, launch.logs);
}

void printRankEnd(const Rank& rank, const char* status, int64_t steps, double seconds) {
  const double peakMb = double(peakResidentBytes()) / (1 << 20);
  if (jsonlProgress()) emitEvent({{"event", "memory"}, {"rank", rank.world.rank}, {"peak_mb", peakMb}});
  else if (rank.main()) std::printf("peak memory: %.0f MB\n", peakMb);
  else std::printf("rank %d: %s after %lld steps (%.1f s), peak memory %.0f MB\n", rank.world.rank, status, (long long)steps, seconds, peakMb);
}

std::optional<Rank> launchOrJoin(int processes, const std::string& runDir) {
  if (const auto status = runLocalRanks(processes, runDir)) {
    if (*status != 0) throw CLI::RuntimeError(*status);
    return std::nullopt;
  }
  return joinWorld();
}

Rank joinWorld() {
  Rank rank;
  rank.world = dist::worldFromEnvironment();
  rank.communicator = dist::Communicator::forWorld(rank.world);
  return rank;
}

}  // namespace hh::cli

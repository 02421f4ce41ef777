#include "engine/distributed/communicator.h"

#include <torch/types.h>

// HH_NO_GLOO: LibTorch came without Gloo's headers (engine/CMakeLists.txt); one process only.
#ifndef HH_NO_GLOO
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// Debian's LibTorch is built with Gloo (libgloo); its header is behind this switch.
#define USE_C10D_GLOO 1
#endif

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace hh::dist {
namespace {

// A launcher variable as an integer in [lo, hi]; `fallback` when unset or empty.
int64_t environmentInteger(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < lo || value > hi)
    throw std::invalid_argument(std::string(name) + "=\"" + text + "\" is not an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
  return value;
}

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allReduceSum(torch::Tensor&) override {}
  void allReduceMax(torch::Tensor&) override {}
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  void barrier() override {}
};

#ifndef HH_NO_GLOO
class GlooGroup final : public Communicator {
 public:
  GlooGroup(const WorldInfo& world, std::chrono::milliseconds timeout) : rank_(world.rank), size_(world.size) {
    const bool local = !world.storeFile.empty();
    const std::string where =
        local ? "file " + world.storeFile : world.masterAddr + ":" + std::to_string(world.masterPort);
    try {
      store_ = local ? fileStore(world, timeout) : tcpStore(world, timeout);
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      // Loopback worlds stay on loopback; otherwise the interface GLOO_SOCKET_IFNAME names, or
      // the one this host's name resolves to (as torch.distributed does).
      const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      if (interface && *interface)
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
      else if (local || world.masterAddr == "127.0.0.1" || world.masterAddr == "localhost")
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      options->threads = 2;
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, world.rank, world.size, options);
    } catch (const std::exception& e) {
      throw std::runtime_error("rank " + std::to_string(world.rank) + " of " + std::to_string(world.size) +
                               ": rendezvous at " + where + " failed: " + firstLine(e.what()));
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allReduceSum(torch::Tensor& values) override {
    std::vector<at::Tensor> one{values};
    run([&] { group_->allreduce(one)->wait(); }, "all-reduce");
  }
  void allReduceMax(torch::Tensor& values) override {
    std::vector<at::Tensor> one{values};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    run([&] { group_->allreduce(one, options)->wait(); }, "all-reduce");
  }
  // Gloo moves host memory: a tensor on a GPU goes through a host copy and back.
  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t.is_cpu() ? t : t.cpu()};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      run([&] { group_->broadcast(one, options)->wait(); }, "broadcast");
      if (!t.is_cpu()) t.copy_(one.front());
    }
  }
  void barrier() override {
    run([&] { group_->barrier()->wait(); }, "barrier");
  }

 private:
  static std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }
  // Rank 0 listens on masterPort (on every interface: LibTorch's TCPStore takes no address to bind).
  static c10::intrusive_ptr<c10d::Store> tcpStore(const WorldInfo& world, std::chrono::milliseconds timeout) {
    c10d::TCPStoreOptions storeOptions;
    storeOptions.port = static_cast<std::uint16_t>(world.masterPort);
    storeOptions.isServer = world.rank == 0;
    storeOptions.numWorkers = static_cast<std::size_t>(world.size);
    storeOptions.waitWorkers = true;
    storeOptions.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(world.masterAddr, storeOptions);
  }
  // Ranks on one host meet through a file: nothing listens. It must not hold an earlier world's
  // keys (the launcher names a fresh one); the last rank to leave deletes it.
  static c10::intrusive_ptr<c10d::Store> fileStore(const WorldInfo& world, std::chrono::milliseconds timeout) {
    auto store = c10::make_intrusive<c10d::FileStore>(world.storeFile, world.size);
    store->setTimeout(timeout);
    return store;
  }
  // Gloo reports a lost peer or a timeout as an exception with a multi-line trace: one line
  // naming this rank is what a user needs.
  template <typename F>
  void run(F&& collective, const char* what) {
    try {
      collective();
    } catch (const std::exception& e) {
      throw std::runtime_error("rank " + std::to_string(rank_) + ": " + what + " failed (" + kLostPeerMessage + "): " +
                               firstLine(e.what()));
    }
  }
  int rank_, size_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};
#endif

}  // namespace

WorldInfo worldFromEnvironment() {
  WorldInfo world;
  world.size = static_cast<int>(environmentInteger("WORLD_SIZE", 1, 1, 65536));
  if (world.size == 1) return world;
  world.rank = static_cast<int>(environmentInteger("RANK", -1, 0, world.size - 1));
  if (world.rank < 0) throw std::invalid_argument("WORLD_SIZE=" + std::to_string(world.size) + " is set but RANK is not");
  world.localRank = static_cast<int>(environmentInteger("LOCAL_RANK", world.rank, 0, 65535));
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr && *addr) world.masterAddr = addr;
  world.masterPort = static_cast<int>(environmentInteger("MASTER_PORT", world.masterPort, 1, 65535));
  if (const char* file = std::getenv("HH_DIST_STORE_FILE"); file && *file) world.storeFile = file;
  return world;
}

std::pair<int64_t, int64_t> shardRange(int64_t total, int rank, int size) {
  const int64_t base = total / size, extra = total % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

std::shared_ptr<Communicator> Communicator::single() { return std::make_shared<SingleProcess>(); }

Communicator& Communicator::orAlone(Communicator* world) {
  static SingleProcess alone;  // stateless: one serves every job and thread
  return world ? *world : alone;
}

bool Communicator::processGroupsAvailable() {
#ifdef HH_NO_GLOO
  return false;
#else
  return true;
#endif
}

std::shared_ptr<Communicator> Communicator::connect(const WorldInfo& world, std::chrono::milliseconds timeout) {
  if (!world.distributed()) return single();
#ifdef HH_NO_GLOO
  (void)timeout;
  throw std::runtime_error("WORLD_SIZE=" + std::to_string(world.size) +
                           ": this build trains in one process only (its LibTorch came without Gloo's headers, "
                           "gloo/algorithm.h); unset WORLD_SIZE, or build against a LibTorch that ships them");
#else
  return std::make_shared<GlooGroup>(world, timeout);
#endif
}

std::shared_ptr<Communicator> Communicator::forWorld(const WorldInfo& world) {
  if (!world.distributed()) return single();
  const int64_t seconds = environmentInteger("HH_DIST_TIMEOUT_S", 1800, 1, 7 * 24 * 3600);
  return connect(world, std::chrono::milliseconds(seconds * 1000));
}

double Communicator::sum(double value) { return sum(std::vector<double>{value}).front(); }

std::vector<double> Communicator::sum(const std::vector<double>& values) {
  if (!distributed() || values.empty()) return values;
  auto packed = torch::tensor(values, torch::kDouble);
  allReduceSum(packed);
  const auto* p = packed.data_ptr<double>();
  return std::vector<double>(p, p + values.size());
}

bool Communicator::any(bool value) {
  if (!distributed()) return value;
  auto flag = torch::tensor({value ? 1.0 : 0.0}, torch::kDouble);
  allReduceMax(flag);
  return flag.item<double>() > 0.5;
}

void Communicator::requireSame(int64_t value, const std::string& what, const std::string& hint) {
  if (!distributed()) return;
  auto both = torch::tensor({double(value), -double(value)}, torch::kDouble);  // max and -min
  allReduceMax(both);
  const double hi = both[0].item<double>(), lo = -both[1].item<double>();
  if (hi != lo)
    throw std::runtime_error("rank " + std::to_string(rank()) + ": the ranks disagree on " + what + " (" + std::to_string(int64_t(lo)) +
                             " to " + std::to_string(int64_t(hi)) + "; this rank has " + std::to_string(value) + ")" +
                             (hint.empty() ? "" : ": " + hint));
}

std::vector<double> Communicator::reduceGradients(const std::vector<torch::Tensor>& params, double weight,
                                                  const std::vector<double>& extra) {
  if (!distributed()) return extra;
  at::NoGradGuard noGrad;
  // One flat float64 buffer: the weighted gradients, then the extras. float64 keeps the sum's
  // rounding below the float32 gradients' own.
  std::vector<torch::Tensor> pieces;
  pieces.reserve(params.size() + 1);
  for (const auto& p : params) {
    const auto g = p.grad();
    // On the host whatever device the gradient is on: Gloo reduces host memory.
    pieces.push_back(g.defined() ? g.detach().reshape({-1}).to(torch::kCPU, torch::kDouble).mul(weight)
                                 : torch::zeros({p.numel()}, torch::kDouble));
  }
  pieces.push_back(torch::tensor(extra, torch::kDouble));
  auto flat = torch::cat(pieces);
  allReduceSum(flat);
  int64_t offset = 0;
  for (const auto& p : params) {
    const int64_t n = p.numel();
    auto summed = flat.narrow(0, offset, n).view(p.sizes()).to(p.device(), p.scalar_type());
    if (p.grad().defined()) p.mutable_grad().copy_(summed);
    else p.mutable_grad() = summed;
    offset += n;
  }
  const auto* tail = flat.data_ptr<double>() + offset;
  return std::vector<double>(tail, tail + extra.size());
}

}  // namespace hh::dist

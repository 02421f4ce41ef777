// engine.distributed.communicator: the c10d/Gloo communicator the data-parallel jobs use, on
// loopback, with each rank on its own thread of this process (the jobs' multi-process use is
// tested through the CLI in app.cli.rank_processes). Every collective is checked against the
// float64 brute-force answer; tolerance 1e-12 (sums of a few float64 numbers).
#include <torch/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/distributed/step_gate.h"
#include "tests/support/hh_test.h"

namespace test_communicator {

namespace {

using hh::dist::Communicator;
using hh::dist::WorldInfo;

int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Runs body(rank, communicator) on `size` threads, one rank each; rethrows the first failure. With
// `storeFile`, the ranks meet through that file (as the CLI's local ranks do), not a TCP port.
void inWorld(int size, const std::function<void(int, Communicator&)>& body, const std::string& storeFile = "") {
  const int port = freePort();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        WorldInfo world;
        world.rank = r, world.size = size, world.masterPort = port, world.storeFile = storeFile;
        auto c = Communicator::connect(world, std::chrono::seconds(30));
        body(r, *c);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Sets (or, with nullptr, unsets) the launcher variables for one check.
void setWorldEnvironment(const char* size, const char* rank, const char* port) {
  auto put = [](const char* name, const char* value) { value ? ::setenv(name, value, 1) : ::unsetenv(name); };
  put("WORLD_SIZE", size);
  put("RANK", rank);
  put("MASTER_PORT", port);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("LOCAL_RANK");
}

}  // namespace

// A build whose LibTorch came without Gloo's headers has no process groups (engine/CMakeLists.txt).
#define REQUIRE_PROCESS_GROUPS()                                                                  \
  if (!Communicator::processGroupsAvailable()) QSKIP("this build has no Gloo: one process only")

class TestCommunicator : public QObject {
  Q_OBJECT

 private:
  void agreementBroadcastAndBarrierThrough(bool throughAFile) {
    const std::string storeFile =
        throughAFile
            ? (std::filesystem::temp_directory_path() / ("hh_rendezvous_" + std::to_string(::getpid()))).string()
            : "";
    std::vector<int> anyCancelled(2), noneCancelled(2);
    std::vector<double> broadcasted(2);
    std::vector<std::string> disagreement(2);
    inWorld(
        2,
        [&](int r, Communicator& c) {
          anyCancelled[static_cast<size_t>(r)] = c.any(r == 1);  // only rank 1 was asked to cancel
          noneCancelled[static_cast<size_t>(r)] = c.any(false);
          std::vector<torch::Tensor> t{torch::full({2}, double(r + 7))};
          c.broadcast(t, 0);
          broadcasted[static_cast<size_t>(r)] = t[0].sum().item<double>();
          c.requireSame(12, "the step");  // same: passes
          try {
            c.requireSame(r == 0 ? 12 : 15, "the resumed step", "share the run folder");
          } catch (const std::runtime_error& e) {
            disagreement[static_cast<size_t>(r)] = e.what();
          }
          c.barrier();
        },
        storeFile);
    if (throughAFile) QVERIFY2(!std::filesystem::exists(storeFile), "the last rank to leave deletes the file");
    for (int r = 0; r < 2; ++r) {
      QVERIFY(anyCancelled[static_cast<size_t>(r)]);
      QVERIFY(!noneCancelled[static_cast<size_t>(r)]);
      QCOMPARE(broadcasted[static_cast<size_t>(r)], 14.0);
      QVERIFY2(disagreement[static_cast<size_t>(r)].find("disagree on the resumed step (12 to 15; this rank has " +
                                                         std::to_string(r == 0 ? 12 : 15) +
                                                         "): share the run folder") != std::string::npos,
               disagreement[static_cast<size_t>(r)].c_str());
    }
  }

 private Q_SLOTS:
  void shardsPartitionTheBatch() {
    for (int64_t total = 0; total <= 17; ++total)
      for (int size = 1; size <= 6; ++size) {
        int64_t expectBegin = 0, smallest = total, largest = 0;
        for (int r = 0; r < size; ++r) {
          const auto [begin, end] = hh::dist::shardRange(total, r, size);
          QCOMPARE(begin, expectBegin);  // contiguous, in rank order
          QVERIFY(end >= begin);
          smallest = std::min(smallest, end - begin), largest = std::max(largest, end - begin);
          expectBegin = end;
        }
        QCOMPARE(expectBegin, total);     // covers every row once
        QVERIFY(largest - smallest <= 1);  // balanced
      }
  }

  void worldFromEnvironment() {
    setWorldEnvironment(nullptr, nullptr, nullptr);
    QCOMPARE(hh::dist::worldFromEnvironment().size, 1);
    QVERIFY(!hh::dist::worldFromEnvironment().distributed());
    setWorldEnvironment("3", "2", "4242");
    const auto w = hh::dist::worldFromEnvironment();
    QCOMPARE(w.size, 3);
    QCOMPARE(w.rank, 2);
    QCOMPARE(w.localRank, 2);
    QCOMPARE(w.masterPort, 4242);
    QCOMPARE(w.masterAddr, std::string("127.0.0.1"));
    QVERIFY(w.storeFile.empty());
    ::setenv("HH_DIST_STORE_FILE", "/tmp/run/.rendezvous-7", 1);
    QCOMPARE(hh::dist::worldFromEnvironment().storeFile, std::string("/tmp/run/.rendezvous-7"));
    ::unsetenv("HH_DIST_STORE_FILE");
    setWorldEnvironment("3", "3", nullptr);
    HH_VERIFY_THROWS_WITH(hh::dist::worldFromEnvironment(), "RANK=\"3\"");
    setWorldEnvironment("2", nullptr, nullptr);
    HH_VERIFY_THROWS_WITH(hh::dist::worldFromEnvironment(), "RANK is not");
    setWorldEnvironment("two", "0", nullptr);
    HH_VERIFY_THROWS_WITH(hh::dist::worldFromEnvironment(), "WORLD_SIZE");
    setWorldEnvironment("2", "0", "70000");
    HH_VERIFY_THROWS_WITH(hh::dist::worldFromEnvironment(), "MASTER_PORT");
    setWorldEnvironment(nullptr, nullptr, nullptr);
  }

  void singleIsTheIdentity() {
    auto c = Communicator::single();
    QCOMPARE(c->size(), 1);
    QVERIFY(c->isMain());
    QCOMPARE(c->sum(2.5), 2.5);
    QVERIFY(c->any(true));
    QVERIFY(!c->any(false));
    auto p = torch::ones({3}, torch::requires_grad());
    p.mutable_grad() = torch::full({3}, 2.0);
    QCOMPARE(c->reduceGradients({p}, 1.0, {7.0}).front(), 7.0);
    QCOMPARE(p.grad().sum().item<double>(), 6.0);  // untouched
  }

  void allReduceMatchesBruteForce() {
    REQUIRE_PROCESS_GROUPS();
    constexpr int kRanks = 3;
    // Rank r contributes values seeded by r; the answer is their float64 sum.
    auto contribution = [](int r) { return torch::randn({5, 7}, torch::TensorOptions().dtype(torch::kDouble)).mul(r + 1).add(r); };
    torch::Tensor expected = torch::zeros({5, 7}, torch::kDouble);
    for (int r = 0; r < kRanks; ++r) {
      torch::manual_seed(100 + r);
      expected += contribution(r);
    }
    std::vector<torch::Tensor> results(kRanks);
    std::vector<double> scalarSums(kRanks);
    std::vector<int> ranks(kRanks), sizes(kRanks);
    inWorld(kRanks, [&](int r, Communicator& c) {  // no QVERIFY on these threads: results checked below
      ranks[static_cast<size_t>(r)] = c.rank();
      sizes[static_cast<size_t>(r)] = c.size();
      torch::Tensor t;
      {
        static std::mutex seedLock;  // torch's default generator is shared by the threads
        std::lock_guard<std::mutex> lock(seedLock);
        torch::manual_seed(100 + r);
        t = contribution(r);
      }
      c.allReduceSum(t);
      results[static_cast<size_t>(r)] = t;
      scalarSums[static_cast<size_t>(r)] = c.sum(double(r) + 0.5);
    });
    for (int r = 0; r < kRanks; ++r) {
      QCOMPARE(ranks[static_cast<size_t>(r)], r);
      QCOMPARE(sizes[static_cast<size_t>(r)], kRanks);
      QVERIFY(results[static_cast<size_t>(r)].sub(expected).abs().max().item<double>() < 1e-12);
      QCOMPARE(scalarSums[static_cast<size_t>(r)], 0.5 + 1.5 + 2.5);
    }
  }

  // The gradient exchange of a training step: sum over ranks of weight_r * grad_r, a missing
  // gradient counted as zero, the extras summed; float32 parameters keep their dtype.
  void reduceGradientsWeightsEachRank() {
    REQUIRE_PROCESS_GROUPS();
    constexpr int kRanks = 3;
    const std::vector<double> weights{0.5, 0.25, 0.25};  // shares of a batch of 4: 2, 1, 1 rows
    auto grad = [](int r) { return torch::arange(6, torch::kDouble).reshape({2, 3}).mul(r + 1).sub(r * 0.125); };
    torch::Tensor expectedA = torch::zeros({2, 3}, torch::kDouble), expectedB = torch::zeros({4}, torch::kDouble);
    for (int r = 0; r < kRanks; ++r) {
      expectedA += weights[static_cast<size_t>(r)] * grad(r);
      if (r != 1) expectedB += weights[static_cast<size_t>(r)] * torch::full({4}, double(r + 1));
    }
    std::vector<torch::Tensor> gotA(kRanks), gotB(kRanks);
    std::vector<double> gotLoss(kRanks);
    inWorld(kRanks, [&](int r, Communicator& c) {
      auto a = torch::zeros({2, 3}, torch::requires_grad());
      auto b = torch::zeros({4}, torch::requires_grad());
      a.mutable_grad() = grad(r).to(torch::kFloat);
      if (r != 1) b.mutable_grad() = torch::full({4}, float(r + 1));  // rank 1: no gradient for b
      const double w = weights[static_cast<size_t>(r)];
      gotLoss[static_cast<size_t>(r)] = c.reduceGradients({a, b}, w, {w * double(10 * (r + 1))}).front();
      gotA[static_cast<size_t>(r)] = a.grad().clone();
      gotB[static_cast<size_t>(r)] = b.grad().clone();
    });
    for (int r = 0; r < kRanks; ++r) {
      HH_COMPARE_DTYPE(gotA[static_cast<size_t>(r)].scalar_type(), torch::kFloat);
      QVERIFY(gotA[static_cast<size_t>(r)].to(torch::kDouble).sub(expectedA).abs().max().item<double>() < 1e-6);
      QVERIFY(gotB[static_cast<size_t>(r)].to(torch::kDouble).sub(expectedB).abs().max().item<double>() < 1e-6);
      QVERIFY(std::abs(gotLoss[static_cast<size_t>(r)] - (0.5 * 10 + 0.25 * 20 + 0.25 * 30)) < 1e-12);
    }
  }

  void agreementBroadcastAndBarrier() {
    REQUIRE_PROCESS_GROUPS();
    agreementBroadcastAndBarrierThrough(false);
  }
  // The CLI's local ranks meet through a file: nothing listens on a port.
  void agreementThroughAFile() {
    REQUIRE_PROCESS_GROUPS();
    agreementBroadcastAndBarrierThrough(true);
  }

  // The step gate alone: no request goes on at once; a pause waits until released, saying when it
  // begins and ends; a cancel while paused stops, saying so.
  void stepGateInAWorldOfOne() {
    auto& alone = Communicator::orAlone(nullptr);
    std::vector<std::pair<bool, bool>> events;
    int polls = 0;
    bool cancel = false;
    hh::dist::StepControl control;
    control.cancelled = [&] { return cancel; };
    control.pauseRequested = [&] { return ++polls <= 3; };  // asked for three polls
    control.pausedChanged = [&](bool paused, bool cancelled) { events.emplace_back(paused, cancelled); };
    QVERIFY(hh::dist::passStepGate(alone, control, std::chrono::milliseconds(1)));
    QCOMPARE(polls, 4);
    QVERIFY((events == std::vector<std::pair<bool, bool>>{{true, false}, {false, false}}));
    events.clear();
    QVERIFY(hh::dist::passStepGate(alone, control, std::chrono::milliseconds(1)));  // not asked: no event
    QVERIFY(events.empty());
    control.pauseRequested = [&] { return true; };
    control.cancelled = [&] { return ++polls > 8; };  // cancelled while it waits
    QVERIFY(!hh::dist::passStepGate(alone, control, std::chrono::milliseconds(1)));
    QVERIFY((events == std::vector<std::pair<bool, bool>>{{true, false}, {false, true}}));
  }

  // Two ranks: one asks to pause and both wait until it asks no more, then both go on; one paused
  // and the other cancelled while they wait: both stop. Every rank reports the same events.
  void stepGateAgreesAcrossRanks() {
    REQUIRE_PROCESS_GROUPS();
    using Clock = std::chrono::steady_clock;
    std::vector<std::vector<std::pair<bool, bool>>> events(2);
    std::vector<int> passed(2, -1), stopped(2, -1);
    std::vector<double> waited(2, 0);
    inWorld(2, [&](int r, Communicator& c) {
      const auto t0 = Clock::now();
      const auto after = [t0](int ms) { return Clock::now() - t0 > std::chrono::milliseconds(ms); };
      hh::dist::StepControl control;
      control.cancelled = [] { return false; };
      control.pauseRequested = [&, r] { return r == 1 && !after(400); };
      control.pausedChanged = [&, r](bool p, bool cancelled) { events[size_t(r)].emplace_back(p, cancelled); };
      passed[size_t(r)] = hh::dist::passStepGate(c, control, std::chrono::milliseconds(20)) ? 1 : 0;
      waited[size_t(r)] = std::chrono::duration<double>(Clock::now() - t0).count();
      const auto t1 = Clock::now();
      control.pauseRequested = [r] { return r == 0; };
      control.cancelled = [&, r, t1] { return r == 1 && Clock::now() - t1 > std::chrono::milliseconds(200); };
      stopped[size_t(r)] = hh::dist::passStepGate(c, control, std::chrono::milliseconds(20)) ? 0 : 1;
    });
    for (size_t r = 0; r < 2; ++r) {
      QCOMPARE(passed[r], 1);
      QVERIFY2(waited[r] >= 0.35,
               ("rank " + std::to_string(r) + " waited " + std::to_string(waited[r]) + " s").c_str());
      QCOMPARE(stopped[r], 1);
      QVERIFY((events[r] ==
               std::vector<std::pair<bool, bool>>{{true, false}, {false, false}, {true, false}, {false, true}}));
    }
  }

  // A rank whose peers never come: a one-line error naming the address, after the timeout. A
  // build without Gloo refuses any world of more than one, at once and saying why.
  void missingPeerTimesOut() {
    WorldInfo world;
    world.rank = 0, world.size = 2, world.masterPort = freePort();
    if (!Communicator::processGroupsAvailable()) {
      HH_VERIFY_THROWS_WITH(Communicator::connect(world, std::chrono::milliseconds(1500)),
                            "WORLD_SIZE=2: this build trains in one process only");
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    HH_VERIFY_THROWS_WITH(Communicator::connect(world, std::chrono::milliseconds(1500)),
                          "rendezvous at 127.0.0.1:" + std::to_string(world.masterPort) + " failed");
    QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    world.storeFile =
        (std::filesystem::temp_directory_path() / ("hh_rendezvous_lone_" + std::to_string(::getpid()))).string();
    HH_VERIFY_THROWS_WITH(Communicator::connect(world, std::chrono::milliseconds(1500)),
                          "rendezvous at file " + world.storeFile + " failed");
    std::filesystem::remove(world.storeFile);
  }
};

HH_TEST_SUITE(TestCommunicator, "engine.distributed.communicator", &TestCommunicator::shardsPartitionTheBatch,
              &TestCommunicator::worldFromEnvironment, &TestCommunicator::singleIsTheIdentity,
              &TestCommunicator::allReduceMatchesBruteForce, &TestCommunicator::reduceGradientsWeightsEachRank,
              &TestCommunicator::agreementBroadcastAndBarrier, &TestCommunicator::agreementThroughAFile,
              &TestCommunicator::stepGateInAWorldOfOne, &TestCommunicator::stepGateAgreesAcrossRanks,
              &TestCommunicator::missingPeerTimesOut)

}  // namespace test_communicator

#if HH_HAVE_QTEST
#include "test_communicator.moc"
#endif

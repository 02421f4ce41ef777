// engine.security.no_network: the CLI never touches the network. `hedgehog distill` (3 steps on
// the tiny GPT-2 fixture) and `hedgehog generate` run under `strace -f -e trace=socket,connect`;
// the test fails on any AF_INET/AF_INET6 (or AF_NETLINK, AF_PACKET) socket and on any connect()
// other than glibc's name-service-cache probe: glog's static initialiser asks getpwuid_r() for the
// user name, and glibc first tries the local nscd daemon on its AF_UNIX socket
// (/var/run/nscd/socket, or /run/nscd/socket); that stays on the machine. Every socket and
// connect line is printed. QSKIP when strace is missing or ptrace is not permitted here.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/engine/jobs/jobs_test_support.h"
#include "tests/support/hh_test.h"

namespace test_no_network {

namespace {

namespace fs = std::filesystem;
namespace c = hh::test::crash;
const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";

std::string strace() {
  for (const char* p : {"/usr/bin/strace", "/bin/strace", "/usr/local/bin/strace"})
    if (fs::exists(p)) return p;
  return {};
}

// Why a line of strace's output is not allowed ("" = allowed). Lines look like
//   1234  socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK, 0) = 3
//   1234  connect(3, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (...)
std::string problemOf(const std::string& line) {
  if (line.find("socket(") != std::string::npos) {
    for (const char* family : {"AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"})
      if (line.find(std::string("socket(") + family + ",") != std::string::npos) return std::string("a ") + family + " socket";
    if (line.find("socket(AF_UNIX,") == std::string::npos) return "a socket of an unexpected family";
    return "";
  }
  if (line.find("connect(") != std::string::npos) {
    if (line.find("sun_path=\"/var/run/nscd/socket\"") != std::string::npos ||
        line.find("sun_path=\"/run/nscd/socket\"") != std::string::npos)
      return "";
    return "a connect() that is not glibc's nscd probe";
  }
  return "";
}

class TestNoNetwork : public QObject {
  Q_OBJECT

 private:
  // Runs `args` under strace; checks and prints every socket/connect call.
  void traced(const std::string& name, const std::vector<std::string>& args) {
    hh::test::TempDir dir("no_network_" + name);
    const auto trace = dir.file("trace.txt"), log = dir.file("log.txt");
    std::vector<std::string> command{strace(), "-f", "-qq", "-e", "trace=socket,connect", "-o", trace};
    command.insert(command.end(), args.begin(), args.end());
    const int rc = c::waitFor(c::spawnLogged(command, log), 300);
    const auto output = c::readAll(log);
    if (rc != 0 && (output.find("ptrace") != std::string::npos || output.find("Operation not permitted") != std::string::npos))
      QSKIP("ptrace is not permitted here (strace cannot attach)");
    QVERIFY2(rc == 0, output.c_str());
    std::istringstream lines(c::readAll(trace));
    std::string line;
    int calls = 0;
    while (std::getline(lines, line)) {
      if (line.find("socket(") == std::string::npos && line.find("connect(") == std::string::npos) continue;
      ++calls;
      qInfo("%s: %s", name.c_str(), line.c_str());
      const auto problem = problemOf(line);
      QVERIFY2(problem.empty(), (name + " made " + problem + ": " + line).c_str());
    }
    qInfo("%s: %d socket/connect calls, none to the network", name.c_str(), calls);
  }

 private Q_SLOTS:
  void initTestCase() {
    setenv("HH_NUM_THREADS", "1", 0);
    if (!fs::exists(HH_CLI_BINARY)) QSKIP("the hedgehog CLI is not built");
    if (strace().empty()) QSKIP("strace is not installed (apt-get install strace; scripts/setup.sh installs it)");
  }

  void classifiesTraceLines() {
    QVERIFY(!problemOf("7 socket(AF_INET, SOCK_STREAM, IPPROTO_IP) = 3").empty());
    QVERIFY(!problemOf("7 socket(AF_INET6, SOCK_DGRAM, IPPROTO_IP) = 3").empty());
    QVERIFY(!problemOf("7 connect(3, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr(\"1.2.3.4\")}, 16) = 0").empty());
    QVERIFY(!problemOf("7 connect(3, {sa_family=AF_UNIX, sun_path=\"/run/dbus/system_bus_socket\"}, 110) = 0").empty());
    QVERIFY(problemOf("7 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK, 0) = 3").empty());
    QVERIFY(problemOf("7 connect(3, {sa_family=AF_UNIX, sun_path=\"/var/run/nscd/socket\"}, 110) = -1 ENOENT").empty());
  }

  void distillOpensNoNetworkSocket() {
    hh::test::TempDir dir("no_network_corpus");
    const auto corpus = hh::test::writeWordCorpus(dir);
    traced("distill", {HH_CLI_BINARY, "distill", kModel, "--run-dir", dir.file("run"), "--corpus", corpus, "--steps", "3",
                       "--eval-every", "3", "--batch-size", "4", "--seq-len", "32", "--max-train", "16"});
  }

  void generateOpensNoNetworkSocket() {
    traced("generate", {HH_CLI_BINARY, "generate", kModel, "--prompt", "The cat sat on", "--max-tokens", "8"});
  }
};

}  // namespace

HH_TEST_SUITE(TestNoNetwork, "engine.security.no_network", &TestNoNetwork::initTestCase, &TestNoNetwork::classifiesTraceLines,
              &TestNoNetwork::distillOpensNoNetworkSocket, &TestNoNetwork::generateOpensNoNetworkSocket)

}  // namespace test_no_network

#if HH_HAVE_QTEST
#include "test_no_network.moc"
#endif

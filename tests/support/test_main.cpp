// Entry point shared by the per-layer test executables: picks one registered suite by name.
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "tests/support/hh_test.h"
#if HH_TEST_USES_ENGINE
#include "engine/core/runtime.h"
#endif

#if HH_TEST_NEEDS_GUI
#include <QApplication>
#endif

namespace hh::test {
namespace {
std::map<std::string, SuiteRunner>& registry() {
  static std::map<std::string, SuiteRunner> suites;
  return suites;
}
}  // namespace

bool registerSuite(const char* name, SuiteRunner runner) {
  registry()[name] = std::move(runner);
  return true;
}
}  // namespace hh::test

int main(int argc, char** argv) {
  auto& suites = hh::test::registry();
  if (argc < 2 || std::strcmp(argv[1], "--list") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::cout << "usage: " << argv[0] << " SUITE [Qt Test arguments]\nsuites:\n";
    for (const auto& entry : suites) std::cout << "  " << entry.first << "\n";
    return argc < 2 ? 2 : 0;
  }
  auto it = suites.find(argv[1]);
  if (it == suites.end()) {
    std::cerr << "no test suite named '" << argv[1] << "' (try --list)\n";
    return 2;
  }
#if HH_TEST_USES_ENGINE
  hh::initRuntime();
#endif
#if HH_TEST_NEEDS_GUI
  QApplication app(argc, argv);
#endif
  // Qt Test sees the program name followed by the arguments after the suite name.
  argv[1] = argv[0];
  return it->second(argc - 1, argv + 1);
}

// Test harness glue. Every suite is a Qt Test class (QObject with private slots) declared with
//   HH_TEST_SUITE(ClassName, "layer.area.suite", &ClassName::testA, &ClassName::testB, ...)
// and, at the end of its .cpp, `#include "file_name.moc"` guarded by HH_HAVE_QTEST.
// One executable per layer (hh_engine_tests, hh_widgets_tests, hh_app_tests) holds its suites;
// `EXE SUITE [Qt Test args]` runs one, `EXE --list` names them; CTest registers one test per suite.
// With Qt Test present (the normal case) the member list is ignored and QTest::qExec runs the
// class's slots. Where Qt is absent (a CUDA machine with only PyTorch), a minimal stand-in runs
// the listed members with the same QVERIFY/QCOMPARE/QSKIP/QFAIL semantics.
#pragma once
#include <functional>
#include <string>

// HH_UNDER_SANITIZER: 1 in the AddressSanitizer build (scripts/test.sh's second stage), whose
// allocator keeps freed blocks (resident memory means nothing there) and runs training several
// times slower (learning guards skip themselves there: their code runs in the shorter suites).
#if defined(__SANITIZE_ADDRESS__)
#define HH_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HH_UNDER_SANITIZER 1
#endif
#endif
#ifndef HH_UNDER_SANITIZER
#define HH_UNDER_SANITIZER 0
#endif

namespace hh::test {
using SuiteRunner = std::function<int(int argc, char** argv)>;
bool registerSuite(const char* name, SuiteRunner runner);
}  // namespace hh::test

#if HH_HAVE_QTEST
#include <QtTest/QtTest>

#define HH_TEST_SUITE(Cls, name, ...)                                           \
  static const bool hh_registered_##Cls = ::hh::test::registerSuite(            \
      name, [](int argc, char** argv) {                                          \
        Cls suite;                                                               \
        return QTest::qExec(&suite, argc, argv);                                 \
      });
// After a helper function that checks (QVERIFY/QCOMPARE return from the helper on failure):
// leave the test function too.
#define HH_RETURN_IF_FAILED() \
  do { if (QTest::currentTestFailed()) return; } while (0)

#else  // minimal stand-in for Qt Test
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace hh::test {
struct Failure : std::runtime_error { using std::runtime_error::runtime_error; };
struct Skipped : std::runtime_error { using std::runtime_error::runtime_error; };
template <typename Cls, typename... Members>
int runMembers(const char* suiteName, Members... members) {
  int failed = 0, passed = 0, skipped = 0;
  auto runOne = [&](auto member) {
    Cls suite;
    try {
      (suite.*member)();
      ++passed;
    } catch (const Skipped& s) {
      ++skipped;
      std::cout << "SKIP   : " << suiteName << ": " << s.what() << "\n";
    } catch (const std::exception& e) {
      ++failed;
      std::cout << "FAIL!  : " << suiteName << ": " << e.what() << "\n";
    }
  };
  (runOne(members), ...);
  std::cout << "Totals: " << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return failed;
}
}  // namespace hh::test

// Q_OBJECT declares a static member that HH_TEST_SUITE defines: inside a member function, the
// private test slots can be named.
#define Q_OBJECT \
 public:     \
  static bool hhRegisterSuite(); \
 private:
#define Q_SLOTS
class QObject {};
#define HH_TEST_LOCATION (std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": ")
#define QVERIFY2(cond, msg) \
  do { if (!(cond)) throw ::hh::test::Failure(HH_TEST_LOCATION + #cond + " (" + std::string(msg) + ")"); } while (0)
#define QVERIFY(cond) QVERIFY2(cond, "")
#define QCOMPARE(a, b)                                                                      \
  do { if (!((a) == (b))) {                                                                 \
      std::ostringstream hh_os; hh_os << #a << " != " << #b;                                \
      throw ::hh::test::Failure(HH_TEST_LOCATION + hh_os.str()); } } while (0)
#define QFAIL(msg) throw ::hh::test::Failure(HH_TEST_LOCATION + std::string(msg))
#define QSKIP(msg) throw ::hh::test::Skipped(std::string(msg))
#define QEXPECT_FAIL(...)
#define HH_RETURN_IF_FAILED() do { } while (0)  // a failed check has thrown already
#define qInfo(...) (std::printf("QINFO  : "), std::printf(__VA_ARGS__), std::printf("\n"))
#define HH_TEST_SUITE(Cls, name, ...)                                                     \
  bool Cls::hhRegisterSuite() {                                                           \
    return ::hh::test::registerSuite(                                                     \
        name, [](int, char**) { return ::hh::test::runMembers<Cls>(name, __VA_ARGS__); }); \
  }                                                                                       \
  static const bool hh_registered_##Cls = Cls::hhRegisterSuite();
#endif

// Exception checks that work with Qt Test and with the stand-in alike.
//   HH_VERIFY_THROWS(Type, expr): expr throws Type (or a subclass).
//   HH_VERIFY_THROWS_WITH(expr, needle): expr throws a std::exception whose what() contains needle.
#define HH_VERIFY_THROWS(Exc, expr)                                  \
  do {                                                               \
    bool hh_thrown = false;                                          \
    try {                                                            \
      (void)(expr);                                                  \
    } catch (const Exc&) {                                           \
      hh_thrown = true;                                              \
    }                                                                \
    QVERIFY2(hh_thrown, "expected " #Exc " from " #expr);            \
  } while (0)
#define HH_VERIFY_THROWS_WITH(expr, needle)                                                    \
  do {                                                                                         \
    std::string hh_what;                                                                       \
    bool hh_thrown = false;                                                                    \
    try {                                                                                      \
      (void)(expr);                                                                            \
    } catch (const std::exception& hh_e) {                                                     \
      hh_thrown = true;                                                                        \
      hh_what = hh_e.what();                                                                   \
    }                                                                                          \
    QVERIFY2(hh_thrown, "expected an exception from " #expr);                                  \
    QVERIFY2(hh_what.find(needle) != std::string::npos,                                        \
             ("message \"" + hh_what + "\" lacks \"" + std::string(needle) + "\"").c_str());   \
  } while (0)

// Dtypes compare with HH_COMPARE_DTYPE(actual, expected), never QCOMPARE: under Qt Test a failing
// QCOMPARE on c10::ScalarType finds c10::toString(ScalarType) by argument-dependent lookup, whose
// string literal Qt then delete[]s, and the suite aborts instead of reporting the failure.
#define HH_COMPARE_DTYPE(actual, expected)                                                          \
  do {                                                                                              \
    const auto hh_actual = (actual);                                                                \
    const auto hh_expected = (expected);                                                            \
    QVERIFY2(hh_actual == hh_expected, (std::string(#actual " is ") + c10::toString(hh_actual) +    \
                                        ", expected " + c10::toString(hh_expected)).c_str());       \
  } while (0)

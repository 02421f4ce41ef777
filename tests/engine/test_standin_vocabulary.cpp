// The engine suites build on a GPU machine without Qt (scripts/device_build.sh), where
// tests/support/hh_test.h stands in for Qt Test with a handful of macros. A suite that reaches
// for anything else of Qt's (QVERIFY_EXCEPTION_THROWN, qWarning, QString, ...) compiles here and
// breaks that build, which only a GPU session would find. This reads every engine suite and the
// shared test support for Qt names outside the stand-in's vocabulary. It also keeps dtypes out of
// QCOMPARE in every test tree (a failing one aborts the suite; tests/support/hh_test.h), and
// checks that every engine suite includes its moc output only where there is Qt and lists every
// test function in its HH_TEST_SUITE (the stand-in runs only those).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/hh_test.h"

namespace test_standin_vocabulary {

namespace {
namespace fs = std::filesystem;

// What hh_test.h defines without Qt, and what Qt Test's harness needs declared.
const std::set<std::string>& standInVocabulary() {
  static const std::set<std::string> names{"QVERIFY", "QVERIFY2", "QCOMPARE",     "QFAIL",  "QSKIP", "QEXPECT_FAIL",
                                           "qInfo",   "QObject",  "Q_OBJECT",     "Q_SLOTS"};
  return names;
}

// The text with comments and string and character literals (raw strings too) blanked: their
// words are not code. A small scanner, not a regex: libstdc++'s recurses per character.
std::string codeOnly(const std::string& text) {
  std::string code = text;
  size_t i = 0;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < code.size(); ++k)
      if (code[k] != '\n') code[k] = ' ';
  };
  while (i < text.size()) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    size_t end = i + 1;
    if (c == '/' && next == '/') {
      end = text.find('\n', i);
    } else if (c == '/' && next == '*') {
      end = text.find("*/", i + 2);
      end = end == std::string::npos ? end : end + 2;
    } else if (c == 'R' && next == '"' && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      const size_t open = text.find('(', i + 2);
      const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      end = open == std::string::npos ? open : text.find(close, open);
      end = end == std::string::npos ? end : end + close.size();
    } else if (c == '"' || c == '\'') {
      end = i + 1;
      while (end < text.size() && text[end] != c && text[end] != '\n') end += text[end] == '\\' ? 2 : 1;
      ++end;
    } else {
      ++i;
      continue;
    }
    end = std::min(end, text.size());
    blank(i, end);
    i = end;
  }
  return code;
}

// The macros `code` #defines: a suite's own QVERIFY_... helpers are not Qt's.
std::set<std::string> definedMacros(const std::string& code) {
  static const std::regex defined("#\\s*define\\s+(\\w+)");
  std::set<std::string> names;
  for (std::sregex_iterator it(code.begin(), code.end(), defined), end; it != end; ++it) names.insert((*it)[1]);
  return names;
}

// Qt-looking names in `code` that the stand-in lacks: Q followed by a capital or an underscore
// (QString, QTRY_VERIFY), q followed by a capital (qWarning), except the stand-in's own and
// `ours` (the macros the test tree defines).
std::vector<std::string> foreignQtNames(const std::string& code, const std::set<std::string>& ours) {
  static const std::regex qtName("\\b(Q[A-Z_]\\w*|q[A-Z]\\w*)\\b");
  std::set<std::string> found;
  for (std::sregex_iterator it(code.begin(), code.end(), qtName), end; it != end; ++it) {
    const std::string name = (*it)[1];
    if (!standInVocabulary().count(name) && !ours.count(name)) found.insert(name);
  }
  return {found.begin(), found.end()};
}

std::vector<std::string> foreignQtNames(const std::string& text) {
  const std::string code = codeOnly(text);
  return foreignQtNames(code, definedMacros(code));
}

// QCOMPARE statements of `code` on dtypes (a scalar_type() or jobDtype() among the arguments):
// they abort the suite when they fail (tests/support/hh_test.h, HH_COMPARE_DTYPE).
std::vector<std::string> dtypeComparisons(const std::string& code) {
  std::vector<std::string> found;
  for (size_t at = code.find("QCOMPARE("); at != std::string::npos; at = code.find("QCOMPARE(", at + 1)) {
    const std::string statement = code.substr(at, code.find(';', at) - at);
    if (statement.find("scalar_type()") != std::string::npos || statement.find("jobDtype(") != std::string::npos)
      found.push_back(statement);
  }
  return found;
}

// The `#include "<suite>.moc"` lines not right under `#if HH_HAVE_QTEST`: without Qt there is no
// moc output to include (the stand-in needs none), so an unguarded one breaks the device build.
std::vector<std::string> unguardedMocIncludes(const std::string& text) {
  std::vector<std::string> found;
  std::istringstream in(text);
  std::string previous;
  for (std::string line; std::getline(in, line);) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    line = line.substr(start);
    if (line.rfind("#include", 0) == 0 && line.find(".moc\"") != std::string::npos && previous != "#if HH_HAVE_QTEST")
      found.push_back(line);
    previous = line;
  }
  return found;
}

// The test functions (private slots `void name()`) a suite's HH_TEST_SUITE(...) leaves out: Qt
// Test runs every slot, the stand-in only those listed, so an unlisted one never runs on the GPU
// machine. `code` is codeOnly's text; the Qt Test hooks (initTestCase, ...) may be left out.
std::vector<std::string> unlistedSlots(const std::string& code) {
  static const std::regex slot("^  void (\\w+)\\(\\)");
  static const std::set<std::string> hooks{"initTestCase", "cleanupTestCase", "init", "cleanup"};
  const size_t suite = code.find("HH_TEST_SUITE(");
  if (suite == std::string::npos) return {};
  const std::string listed = code.substr(suite, code.find(')', suite) - suite);
  std::vector<std::string> found;
  for (size_t at = code.find("Q_SLOTS:"); at != std::string::npos; at = code.find("Q_SLOTS:", at + 1)) {
    std::istringstream in(code.substr(at, code.find("\n};", at) - at));
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, slot) && !hooks.count(m[1]) && listed.find("::" + m[1].str()) == std::string::npos)
        found.push_back(m[1]);
  }
  return found;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// What `find` finds in each engine suite (tests/engine/**.cpp), a line "path: finding" each;
// `read` counts the files read.
template <class Find>
std::string findInEngineSuites(size_t& read, Find find) {
  const fs::path root(HH_SOURCE_DIR);
  std::string found;
  for (const auto& entry : fs::recursive_directory_iterator(root / "tests" / "engine")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
    ++read;
    for (const auto& finding : find(readFile(entry.path())))
      found += fs::relative(entry.path(), root).generic_string() + ": " + finding + "\n";
  }
  return found;
}

}  // namespace

class StandInVocabularyTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void engineSuitesUseOnlyTheStandIn() {
    const fs::path root(HH_SOURCE_DIR);
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(root / "tests" / "engine"))
      if (entry.is_regular_file()) files.push_back(entry.path());
    for (const auto& entry : fs::directory_iterator(root / "tests" / "support"))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::vector<std::pair<std::string, std::string>> codes;  // path from the root, code
    std::set<std::string> ours;
    for (const auto& path : files) {
      const auto ext = path.extension();
      // The harness itself: its Qt half is behind HH_HAVE_QTEST.
      if ((ext != ".h" && ext != ".cpp") || path.filename() == "hh_test.h" || path.filename() == "test_main.cpp") continue;
      codes.emplace_back(fs::relative(path, root).generic_string(), codeOnly(readFile(path)));
      const auto defined = definedMacros(codes.back().second);
      ours.insert(defined.begin(), defined.end());
    }
    const size_t read = codes.size();
    std::string problems;
    for (const auto& [path, code] : codes)
      for (const auto& name : foreignQtNames(code, ours)) problems += path + ": " + name + "\n";
    QVERIFY2(read > 50, ("read only " + std::to_string(read) + " files").c_str());
    QVERIFY2(problems.empty(), ("not in the stand-in for Qt Test (tests/support/hh_test.h):\n" + problems).c_str());
  }

  // Every engine suite includes its moc output only under HH_HAVE_QTEST; the reader finds one
  // that does not.
  void engineSuitesGuardTheirMocOutput() {
    size_t read = 0;
    const std::string problems =
        findInEngineSuites(read, [](const std::string& text) { return unguardedMocIncludes(text); });
    QVERIFY2(read > 50, ("read only " + std::to_string(read) + " files").c_str());
    QVERIFY2(problems.empty(), ("put these under #if HH_HAVE_QTEST ... #endif:\n" + problems).c_str());
    QCOMPARE(unguardedMocIncludes("HH_TEST_SUITE(A, \"a\", &A::f)\n#include \"test_a.moc\"\n").size(), size_t(1));
    QVERIFY(unguardedMocIncludes("HH_TEST_SUITE(A, \"a\", &A::f)\n\n#if HH_HAVE_QTEST\n#include \"test_a.moc\"\n#endif\n")
                .empty());
  }

  // Every test function of an engine suite is in its HH_TEST_SUITE list (the stand-in runs only
  // those); the reader finds one that is not.
  void engineSuitesListEverySlot() {
    size_t read = 0;
    const std::string problems =
        findInEngineSuites(read, [](const std::string& text) { return unlistedSlots(codeOnly(text)); });
    QVERIFY2(read > 50, ("read only " + std::to_string(read) + " files").c_str());
    QVERIFY2(problems.empty(), ("add these to the file's HH_TEST_SUITE(...):\n" + problems).c_str());
    const std::string suite =
        "class A : public QObject {\n private Q_SLOTS:\n  void initTestCase() {}\n  void f() {}\n"
        "  void g() {}\n};\nHH_TEST_SUITE(A, \"a\", &A::f)\n";
    QCOMPARE(unlistedSlots(suite), std::vector<std::string>{"g"});
  }

  // The reader catches what broke the device build once, and lets the rest through.
  void catchesQtNamesOutsideTheStandIn() {
    const std::string bad =
        "QVERIFY_EXCEPTION_THROWN(f(), std::exception);\n"
        "qWarning(\"x\");\n"
        "QVERIFY2(a < 1, qPrintable(QString::number(a)));\n";
    const std::vector<std::string> expected{"QString", "QVERIFY_EXCEPTION_THROWN", "qPrintable", "qWarning"};
    QVERIFY(foreignQtNames(bad) == expected);
    const std::string good =
        "#define QVERIFY_FAILS(x) QVERIFY(!(x))\n"
        "// QString in a comment, \"qWarning\" in a string\n"
        "QVERIFY_FAILS(ok); QCOMPARE(qkv, 1); qInfo(\"QTest %d\", 1); const char c = 'Q';\n";
    QVERIFY(foreignQtNames(good).empty());
  }

  // Every test tree (engine, widgets, app): no QCOMPARE on a dtype; the reader finds one.
  void noSuiteComparesDtypesWithQCompare() {
    const fs::path root(HH_SOURCE_DIR);
    std::string problems;
    size_t read = 0;
    for (const auto& entry : fs::recursive_directory_iterator(root / "tests")) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      ++read;
      for (const auto& statement : dtypeComparisons(codeOnly(readFile(entry.path()))))
        problems += fs::relative(entry.path(), root).generic_string() + ": " + statement + "\n";
    }
    QVERIFY2(read > 80, ("read only " + std::to_string(read) + " files").c_str());
    QVERIFY2(problems.empty(), ("use HH_COMPARE_DTYPE (tests/support/hh_test.h):\n" + problems).c_str());
    QCOMPARE(dtypeComparisons("QCOMPARE(p.scalar_type(), torch::kFloat);\nQCOMPARE(n, 2);").size(), size_t(1));
    QVERIFY(dtypeComparisons("HH_COMPARE_DTYPE(p.scalar_type(), torch::kFloat); QCOMPARE(x.size(0), 2);").empty());
  }
};

HH_TEST_SUITE(StandInVocabularyTest, "engine.standin_vocabulary", &StandInVocabularyTest::engineSuitesUseOnlyTheStandIn,
              &StandInVocabularyTest::engineSuitesGuardTheirMocOutput,
              &StandInVocabularyTest::catchesQtNamesOutsideTheStandIn,
              &StandInVocabularyTest::noSuiteComparesDtypesWithQCompare,
              &StandInVocabularyTest::engineSuitesListEverySlot)

}  // namespace test_standin_vocabulary

#if HH_HAVE_QTEST
#include "test_standin_vocabulary.moc"
#endif

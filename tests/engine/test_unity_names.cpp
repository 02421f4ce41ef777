// Unity builds compile a target's files in batches, one translation unit a batch (docs/design.md,
// "Libraries, the CLI and the test suites compile in batches"). What a file keeps to itself (its
// anonymous namespace, a `static` function or variable, a macro it leaves defined, a
// using-directive in a namespace another file's code is in) is then seen by the files after it
// in its batch. Two files of one target keeping the same name break the build at best; at worst
// a call picks the other file's overload without a word. This suite reads the files of every
// target hh_unity_build was given (the list CMake generates) and fails on a name two of them
// keep. The test executables are read too; their suites' file namespaces (checked at configure
// time, tests/CMakeLists.txt) already hold them apart.
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/child_process.h"  // readAll
#include "tests/support/hh_test.h"
#include "unity_targets.h"

namespace test_unity_names {

namespace {
namespace fs = std::filesystem;

struct Token {
  std::string text;  // an identifier, a number, "::", "->", one punctuation character, "" (a literal)
  int line = 0;
};

struct Scan {
  std::vector<Token> tokens;
  std::map<std::string, int> macros;  // left defined at the end of the file: name -> line
};

size_t skipLiteral(const std::string& s, size_t i, char quote) {  // s[i] == quote
  for (++i; i < s.size() && s[i] != quote; ++i)
    if (s[i] == '\\') ++i;
  return i + 1;
}

size_t skipRawString(const std::string& s, size_t i) {  // s[i] == '"' after R: R"delim( ... )delim"
  const size_t open = s.find('(', i);
  const std::string close = ")" + s.substr(i + 1, open - i - 1) + "\"";
  const size_t end = s.find(close, open);
  return end == std::string::npos ? s.size() : end + close.size();
}

// A preprocessor line from s[i] == '#' to its end (continuations included); #define and #undef are
// kept in `macros`.
size_t readDirective(const std::string& s, size_t i, int line, std::map<std::string, int>& macros) {
  size_t end = i;
  while (end < s.size() && (s[end] != '\n' || s[end - 1] == '\\')) ++end;
  std::istringstream words(s.substr(i + 1, end - i - 1));
  std::string verb, name;
  words >> verb >> name;
  name = name.substr(0, name.find('('));
  if (verb == "define") macros[name] = line;
  if (verb == "undef") macros.erase(name);
  return end;
}

bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The tokens of a C++ file, without comments, preprocessor lines and the contents of literals.
Scan tokenize(const std::string& s) {
  Scan scan;
  int line = 1;
  bool lineStart = true;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const size_t from = i;
    if (c == '\n') {
      ++line, ++i, lineStart = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '#' && lineStart) {
      i = readDirective(s, i, line, scan.macros);
    } else if (s.compare(i, 2, "//") == 0) {
      i = s.find('\n', i);
      if (i == std::string::npos) i = s.size();
    } else if (s.compare(i, 2, "/*") == 0) {
      i = s.find("*/", i + 2);
      i = i == std::string::npos ? s.size() : i + 2;
    } else if (c == '"' || c == '\'') {
      i = skipLiteral(s, i, c);
      scan.tokens.push_back({"", line});
    } else if (isIdentChar(c)) {
      while (i < s.size() && (isIdentChar(s[i]) || (std::isdigit(static_cast<unsigned char>(c)) && s[i] == '\''))) ++i;
      const std::string word = s.substr(from, i - from);
      if (i < s.size() && s[i] == '"' &&
          (word == "R" || word == "LR" || word == "uR" || word == "UR" || word == "u8R")) {
        i = skipRawString(s, i);
        scan.tokens.push_back({"", line});
      } else {
        scan.tokens.push_back({word, line});
      }
    } else {
      const bool pair = s.compare(i, 2, "::") == 0 || s.compare(i, 2, "->") == 0;
      i += pair ? 2 : 1;
      scan.tokens.push_back({s.substr(from, i - from), line});
    }
    for (size_t k = from; k < i && k < s.size(); ++k) line += s[k] == '\n';
    lineStart = false;
  }
  return scan;
}

bool isIdentifier(const std::string& t) {
  return !t.empty() && (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_');
}

using Statement = std::vector<const Token*>;  // one declaration's head; "(" stands for a whole (...)

// The statement without its [[attributes]] and template <...> heads.
Statement withoutPreamble(Statement s) {
  for (size_t k = 0; k + 1 < s.size(); ++k)
    if (s[k]->text == "[" && s[k + 1]->text == "[") {
      size_t end = k + 2;
      while (end + 1 < s.size() && !(s[end]->text == "]" && s[end + 1]->text == "]")) ++end;
      s.erase(s.begin() + k, s.begin() + std::min(end + 2, s.size()));
    }
  while (!s.empty() && s[0]->text == "template") {
    size_t k = 1;
    for (int depth = 0; k < s.size(); ++k) {
      depth += s[k]->text == "<" ? 1 : s[k]->text == ">" ? -1 : 0;
      if (depth == 0) break;
    }
    s.erase(s.begin(), s.begin() + std::min(k + 1, s.size()));
  }
  return s;
}

// The name a namespace-scope declaration declares, or "" (static_assert, friend, an anonymous
// struct, an explicit instantiation).
std::string declaredName(const Statement& statement) {
  const Statement s = withoutPreamble(statement);
  if (s.empty() || s[0]->text == "static_assert" || s[0]->text == "friend" || s[0]->text == "extern") return "";
  const std::string& head = s[0]->text;
  if (head == "using" && s.size() > 1 && s[1]->text == "namespace") return "using namespace";
  if ((head == "using" || head == "namespace") && s.size() > 2 && s[2]->text == "=") return s[1]->text;
  if (head == "using" || head == "typedef") return s.back()->text;
  for (size_t k = 0; k < s.size(); ++k) {
    const std::string& t = s[k]->text;
    if (t == "struct" || t == "class" || t == "union" || t == "enum") {
      while (k + 1 < s.size() && (s[k + 1]->text == "class" || s[k + 1]->text == "struct")) ++k;
      return k + 1 < s.size() && isIdentifier(s[k + 1]->text) ? s[k + 1]->text : "";
    }
    if (t != "static" && t != "inline" && t != "constexpr" && t != "const" && t != "thread_local") break;
  }
  std::string last;
  int angles = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const std::string& t = s[k]->text;
    if (t == "operator") return "operator" + (k + 1 < s.size() ? s[k + 1]->text : "");
    if (t == "<" && k > 0 && isIdentifier(s[k - 1]->text)) ++angles;
    if (t == ">" && angles > 0) --angles;
    if (angles > 0) continue;
    if (t == "(" && last != "decltype" && last != "alignas" && last != "__attribute__") return last;
    if (t == "=" || t == "[") return last;
    if (isIdentifier(t)) last = t;
  }
  return last;
}

struct Declared {
  std::string name;
  std::string scope;  // the named namespaces around it: "::hh::attn", "" for the global one
  int line = 0;
  // For an alias or a using-declaration, its tokens: two files may repeat one word for word (it
  // names the same thing), not otherwise.
  std::string alias;
};

bool isAlias(const Statement& s) {
  return !s.empty() && (s[0]->text == "using" || s[0]->text == "typedef" ||
                        (s[0]->text == "namespace" && s.size() > 2 && s[2]->text == "="));
}

class ScopeReader {
 public:
  explicit ScopeReader(const std::vector<Token>& tokens) : t_(tokens) {}

  // Reads one namespace scope (scope_) from i_ to its closing brace (or the end of the file).
  void read(bool fileLocal) {
    scopes.insert(scope_);
    Statement statement;
    while (i_ < t_.size()) {
      const std::string& x = t_[i_].text;
      if (x == "}") {
        ++i_;
        return;
      }
      if (x == ";") {
        ++i_;
        record(statement, fileLocal);
        statement.clear();
      } else if (x == "(") {
        statement.push_back(&t_[i_]);
        skipGroup("(", ")");
      } else if (x == "{") {
        body(statement, fileLocal);
        statement.clear();
      } else {
        statement.push_back(&t_[i_++]);
      }
    }
  }

  std::vector<Declared> declared;
  std::set<std::string> scopes;  // every namespace the file has declarations in, "" the global one

 private:
  // At the "{" after `statement`: a namespace is read as a scope; a function's, a class's or an
  // initializer's braces are skipped, with what follows them up to ";" where the statement goes on.
  void body(const Statement& statement, bool fileLocal) {
    const std::string head = statement.empty() ? "" : statement[0]->text;
    const bool inlineNs = head == "inline" && statement.size() > 1 && statement[1]->text == "namespace";
    if (head == "namespace" || inlineNs || head == "extern") {
      const bool anonymous = statement.size() == (inlineNs ? 2u : 1u) && head != "extern";
      if (fileLocal && !anonymous && head != "extern") record(statement, true);
      const std::string outer = scope_;
      for (size_t k = inlineNs ? 2 : 1; head != "extern" && k < statement.size(); ++k)
        if (isIdentifier(statement[k]->text)) scope_ += "::" + statement[k]->text;
      ++i_;
      read(fileLocal || anonymous);
      scope_ = outer;
      return;
    }
    record(statement, fileLocal);
    if (fileLocal) recordEnumerators(withoutPreamble(statement));
    bool function = false;
    for (const Token* token : withoutPreamble(statement)) {
      if (token->text == "=" || token->text == "struct" || token->text == "class" || token->text == "enum" ||
          token->text == "union")
        break;
      function = function || token->text == "(";
    }
    skipGroup("{", "}");
    if (function) return;
    for (int depth = 0; i_ < t_.size() && (depth > 0 || t_[i_].text != ";"); ++i_)
      depth += (t_[i_].text == "{" || t_[i_].text == "(") ? 1 : (t_[i_].text == "}" || t_[i_].text == ")") ? -1 : 0;
    ++i_;
  }

  // An unscoped enum's enumerators join the scope around it: `enum Column { kFile, kKind = 2 }`.
  void recordEnumerators(const Statement& s) {  // t_[i_] is its "{"
    if (s.empty() || s[0]->text != "enum" || (s.size() > 1 && (s[1]->text == "class" || s[1]->text == "struct")))
      return;
    int depth = 0;
    for (size_t k = i_; k < t_.size(); ++k) {
      depth += t_[k].text == "{" || t_[k].text == "(" ? 1 : t_[k].text == "}" || t_[k].text == ")" ? -1 : 0;
      if (depth == 0) break;
      if (depth == 1 && isIdentifier(t_[k].text) && (t_[k - 1].text == "{" || t_[k - 1].text == ","))
        declared.push_back({t_[k].text, scope_, t_[k].line, ""});
    }
  }

  void skipGroup(const char* open, const char* close) {  // t_[i_] is `open`
    for (int depth = 0; i_ < t_.size(); ++i_) {
      depth += t_[i_].text == open ? 1 : t_[i_].text == close ? -1 : 0;
      if (depth == 0) break;
    }
    ++i_;
  }

  void record(const Statement& statement, bool fileLocal) {
    if (statement.empty()) return;
    bool ownAnywhere = isAlias(statement);  // in a .cpp file, the file's own at any namespace scope
    for (const Token* token : statement) ownAnywhere = ownAnywhere || token->text == "static";
    if (!fileLocal && !ownAnywhere) return;
    const std::string name = declaredName(statement);
    if (name.empty()) return;
    std::string alias;
    if (isAlias(statement) && name != "using namespace")
      for (const Token* token : statement) alias += token->text + " ";
    declared.push_back({name, scope_, statement[0]->line, alias});
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  std::string scope_;
};

struct FileNames {
  std::vector<Declared> names;   // what the file keeps to itself
  std::set<std::string> scopes;  // where its code is
};

// What a file keeps to itself and the files after it in a batch would see.
FileNames fileLocalNames(const std::string& source) {
  const Scan scan = tokenize(source);
  ScopeReader reader(scan.tokens);
  reader.read(false);
  for (const auto& [name, line] : scan.macros) reader.declared.push_back({"macro " + name, "", line, ""});
  return {reader.declared, reader.scopes};
}

// Whether code in scope `inner` sees the names of scope `outer`: it is outer or inside it.
bool encloses(const std::string& outer, const std::string& inner) {
  return inner.compare(0, outer.size(), outer) == 0 &&
         (inner.size() == outer.size() || inner.compare(outer.size(), 2, "::") == 0);
}

// Whether code in one scope sees names of the other: one encloses the other, or they are one.
bool related(const std::string& a, const std::string& b) {
  return encloses(a, b) || encloses(b, a);
}

// Each target compiled in unity batches (hh_unity_build, generated/unity_targets.h) with its .cpp
// files. The CUDA wrappers join hh_attention only in a GPU build (HH_CUDA_KERNELS), which CI never
// configures, so they are read with it everywhere.
std::map<std::string, std::set<fs::path>> batchedTargets() {
  std::map<std::string, std::set<fs::path>> targets;
  for (const auto& target : kHhUnityTargets) {
    std::istringstream sources(target.sources);
    std::string path;
    while (std::getline(sources, path, ';'))
      if (!path.empty()) targets[target.name].insert(path);
  }
  for (const auto& entry : fs::directory_iterator(fs::path(HH_SOURCE_DIR) / "engine" / "cuda"))
    if (entry.path().extension() == ".cpp") targets["hh_attention"].insert(entry.path());
  return targets;
}

using NamesByFile = std::map<std::string, FileNames>;

// Whether code of a file other than `file` lies in `scope` or inside it.
bool anotherFileIsIn(const NamesByFile& namesByFile, const std::string& file, const std::string& scope) {
  for (const auto& [other, kept] : namesByFile)
    if (other != file)
      for (const auto& inner : kept.scopes)
        if (encloses(scope, inner)) return true;
  return false;
}

// "name: a.cpp:12 b.cpp:40" for every name that files of `namesByFile` keep in related scopes
// (one alias repeated word for word excepted), then each using-directive another file's code sees.
std::vector<std::string> clashes(const NamesByFile& namesByFile) {
  struct Place {
    std::string file;
    Declared declared;
  };
  std::map<std::string, std::vector<Place>> byName;
  std::vector<std::string> out, directives;
  for (const auto& [file, kept] : namesByFile)
    for (const auto& declared : kept.names) {
      if (declared.name != "using namespace")
        byName[declared.name].push_back({file, declared});
      else if (anotherFileIsIn(namesByFile, file, declared.scope))
        directives.push_back(file + ":" + std::to_string(declared.line) + " has a using-directive another file sees");
    }
  for (const auto& [name, places] : byName) {
    std::vector<bool> clashing(places.size(), false);
    for (size_t i = 0; i < places.size(); ++i)
      for (size_t j = i + 1; j < places.size(); ++j) {
        const Declared &a = places[i].declared, &b = places[j].declared;
        if (places[i].file == places[j].file || !related(a.scope, b.scope)) continue;
        if (!a.alias.empty() && a.alias == b.alias) continue;
        clashing[i] = clashing[j] = true;
      }
    std::string line = name + ":";
    for (size_t i = 0; i < places.size(); ++i)
      if (clashing[i]) line += " " + places[i].file + ":" + std::to_string(places[i].declared.line);
    if (line.size() > name.size() + 1) out.push_back(line);
  }
  out.insert(out.end(), directives.begin(), directives.end());
  return out;
}

std::set<std::string> qualifiedNames(const std::vector<Declared>& names) {
  std::set<std::string> out;
  for (const auto& declared : names) out.insert(declared.scope + "::" + declared.name);
  return out;
}

}  // namespace

class UnityNamesTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void noTwoFilesOfABatchedTargetKeepOneName() {
    const fs::path root = HH_SOURCE_DIR;
    std::vector<std::string> problems;
    size_t files = 0, names = 0;
    for (const auto& [target, sources] : batchedTargets()) {
      NamesByFile namesByFile;
      for (const auto& path : sources) {
        auto& kept = namesByFile[fs::relative(path, root).generic_string()];
        kept = fileLocalNames(hh::test::crash::readAll(path.string()));
        names += kept.names.size();
      }
      files += sources.size();
      for (const auto& clash : clashes(namesByFile)) problems.push_back(target + ": " + clash);
    }
    QVERIFY2(files > 100 && names > 300, ("read " + std::to_string(files) + " files, " + std::to_string(names) +
                                          " file-local names: the scan reads too little")
                                             .c_str());
    std::string message = "file-local names that files compiled in one batch share (rename one):";
    for (const auto& problem : problems) message += "\n  " + problem;
    QVERIFY2(problems.empty(), message.c_str());
  }

  // The reader finds each kind of file-local declaration, and only those.
  void readsEveryKindOfFileLocalName() {
    // Not a raw string: moc reads this file too.
    // clang-format off
    const std::string source =
        "#include <map>\n"
        "#define LEFT_DEFINED(x) x\n"
        "#define UNDONE 1\n"
        "#undef UNDONE\n"
        "namespace hh::attn {\n"
        "namespace {\n"
        "namespace fs = std::filesystem;\n"
        "constexpr double kNaN = 0.0 / 0.0;\n"
        "const std::map<std::string, std::vector<int>> kTable{{\"a\", {1}}};\n"
        "struct Shape { int t = 0; void f() { int local = 1; } };\n"
        "enum class Mode : int { kA, kB };\n"
        "enum Column { kFile, kKind = (2 + 1), kCount };\n"
        "using Rows = std::vector<float>;\n"
        "template <typename T, int N = (3 > 2)>\n"
        "std::vector<T> gather(const T& x, Mode m = {}) { return {}; }\n"
        "auto scale = [](float x) { return x * 2; };\n"
        "[[noreturn]] void fail(const std::string& why);\n"
        "namespace detail { int helper() { return 1; } }\n"
        "const char* kText = \"not { a brace\";  // nor } this\n"
        "const char* kRaw = R\"x(a } and a \" inside)x\";\n"
        "}  // namespace\n"
        "static int countOnce(int) { return 0; }\n"
        "int exported(int x) { static int calls = 0; return x; }\n"
        "class Public { static int member; };\n"
        "}  // namespace hh::attn\n";
    // clang-format on
    const std::set<std::string> expected = {
        "::macro LEFT_DEFINED", "::hh::attn::fs",        "::hh::attn::kNaN",   "::hh::attn::kTable",
        "::hh::attn::Shape",    "::hh::attn::Mode",      "::hh::attn::Rows",   "::hh::attn::gather",
        "::hh::attn::scale",    "::hh::attn::fail",      "::hh::attn::detail", "::hh::attn::detail::helper",
        "::hh::attn::kText",    "::hh::attn::countOnce", "::hh::attn::Column", "::hh::attn::kFile",
        "::hh::attn::kKind",    "::hh::attn::kCount",    "::hh::attn::kRaw"};
    QCOMPARE(qualifiedNames(fileLocalNames(source).names), expected);
  }

  void reportsAClashAndAUsingDirectiveSeenElsewhere() {
    NamesByFile namesByFile;
    namesByFile["a.cpp"] =
        fileLocalNames("namespace { struct Setup {}; }\nusing namespace std;\nnamespace fs = std::fs;");
    namesByFile["b.cpp"] =
        fileLocalNames("namespace x {\nstatic void run() {}\nstruct Setup;\nnamespace fs = std::fs;\n}");
    namesByFile["c.cpp"] = fileLocalNames("namespace {\n\nstruct Setup { int a; };\nusing Row = int;\n}");
    namesByFile["d.cpp"] = fileLocalNames("namespace y {\nusing Row = long;\n}");
    namesByFile["e.cpp"] = fileLocalNames("namespace p { namespace { int count; } }");
    namesByFile["f.cpp"] = fileLocalNames("namespace q {\nusing namespace std;\nnamespace { int count; }\n}");
    namesByFile["g.cpp"] = fileLocalNames("namespace p::inner {\nstatic int count;\n}");
    // fs is one alias twice; the two Rows differ; p's count is seen in p::inner, q's in neither; a's
    // global using-directive reaches every file, f's in q none
    const auto found = clashes(namesByFile);
    QCOMPARE(found.size(), size_t(4));
    QCOMPARE(found[0], std::string("Row: c.cpp:4 d.cpp:2"));
    QCOMPARE(found[1], std::string("Setup: a.cpp:1 c.cpp:3"));
    QCOMPARE(found[2], std::string("count: e.cpp:1 g.cpp:2"));
    QCOMPARE(found[3], std::string("a.cpp:2 has a using-directive another file sees"));
  }
};

HH_TEST_SUITE(UnityNamesTest, "engine.unity_names", &UnityNamesTest::noTwoFilesOfABatchedTargetKeepOneName,
              &UnityNamesTest::readsEveryKindOfFileLocalName,
              &UnityNamesTest::reportsAClashAndAUsingDirectiveSeenElsewhere)

}  // namespace test_unity_names

#if HH_HAVE_QTEST
#include "test_unity_names.moc"
#endif

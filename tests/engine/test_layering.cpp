// The layering as a checked fact: every #include in engine/, widgets/ and app/ read against the
// table engine/CMakeLists.txt declares (engine_layers.h, generated at configure time):
//   - an engine library includes only its own folder and the libraries below it (DEPS, closed
//     over their DEPS);
//   - a library declared TORCH none reaches no Torch header, not even through another engine
//     header; one declared private reaches Torch from its .cpp files only;
//   - engine/ includes no Qt; widgets/ includes neither Torch nor engine/;
//   - in app/gui, only the sessions and runners (*_session.cpp, *_runner.cpp, and the pieces they
//     share, session_*.cpp) reach Torch, and a header that reaches it is included by nothing else.
// "Reaches" follows quoted includes through the tree, so a Torch header two files away counts.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine_layers.h"
#include "tests/support/hh_test.h"

namespace test_layering {

namespace {
namespace fs = std::filesystem;

struct Source {
  std::vector<std::string> quoted;  // "engine/x/y.h" as written
  std::vector<std::string> angled;  // <torch/torch.h> as written, without the brackets
};

bool isTorchHeader(const std::string& h) {
  return h.rfind("torch/", 0) == 0 || h.rfind("ATen/", 0) == 0 || h.rfind("c10/", 0) == 0 || h.rfind("caffe2/", 0) == 0;
}
bool isQtHeader(const std::string& h) { return (!h.empty() && h[0] == 'Q') || h.rfind("qcustomplot", 0) == 0; }

// Every .h/.cpp under the given top folders, keyed by its path from the source root.
std::map<std::string, Source> readTree(const fs::path& root, std::initializer_list<const char*> tops) {
  // Not a raw string: moc's preprocessor reads this file too.
  static const std::regex include("^\\s*#\\s*include\\s*([<\"])([^>\"]+)[>\"]");
  std::map<std::string, Source> tree;
  for (const char* top : tops)
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      Source source;
      std::ifstream in(entry.path());
      std::string line;
      std::smatch m;
      while (std::getline(in, line))
        if (std::regex_search(line, m, include)) (m[1] == "<" ? source.angled : source.quoted).push_back(m[2]);
      tree[fs::relative(entry.path(), root).generic_string()] = std::move(source);
    }
  return tree;
}

std::string folderOf(const std::string& path) {  // "engine/io/x.h" -> "io"
  const auto first = path.find('/');
  return path.substr(first + 1, path.find('/', first + 1) - first - 1);
}

class TorchReach {
 public:
  explicit TorchReach(const std::map<std::string, Source>& tree) : tree_(tree) {}
  // The chain by which `path` reaches a Torch header ("a.h -> b.h -> <torch/torch.h>"), or "".
  std::string chain(const std::string& path) {
    if (const auto it = memo_.find(path); it != memo_.end()) return it->second;
    memo_[path] = "";  // cycles (none expected) end here
    std::string result;
    const auto it = tree_.find(path);
    if (it != tree_.end()) {
      for (const auto& h : it->second.angled)
        if (isTorchHeader(h)) result = path + " -> <" + h + ">";
      for (size_t i = 0; result.empty() && i < it->second.quoted.size(); ++i) {
        const auto next = chain(it->second.quoted[i]);
        if (!next.empty()) result = path + " -> " + next;
      }
    }
    return memo_[path] = result;
  }

 private:
  const std::map<std::string, Source>& tree_;
  std::map<std::string, std::string> memo_;
};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += "\n" + line;
  return out;
}

struct Layer {
  std::string torch;
  std::set<std::string> below;  // DEPS closed over theirs
};

std::map<std::string, Layer> layers() {
  std::map<std::string, Layer> out;
  for (const auto& l : kHhEngineLayers) {  // declared bottom to top
    Layer layer{l.torch, {}};
    std::istringstream deps(l.deps);
    std::string dep;
    while (std::getline(deps, dep, ';')) {
      if (dep.empty()) continue;
      layer.below.insert(dep);
      layer.below.insert(out.at(dep).below.begin(), out.at(dep).below.end());
    }
    out[l.folder] = layer;
  }
  return out;
}

}  // namespace

class LayeringTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyEngineFolderIsALibrary() {
    const auto table = layers();
    for (const auto& entry : fs::directory_iterator(fs::path(HH_SOURCE_DIR) / "engine"))
      if (entry.is_directory())
        QVERIFY2(table.count(entry.path().filename().string()),
                 ("engine/" + entry.path().filename().string() + " is in no hh_engine_library()").c_str());
  }

  void engineIncludesOnlyWhatItDependsOn() {
    const auto table = layers();
    const auto tree = readTree(HH_SOURCE_DIR, {"engine"});
    TorchReach torch(tree);
    std::vector<std::string> problems;
    for (const auto& [path, source] : tree) {
      const std::string folder = folderOf(path);
      const auto layer = table.find(folder);
      if (layer == table.end()) continue;  // everyEngineFolderIsALibrary says so
      for (const auto& h : source.angled)
        if (isQtHeader(h)) problems.push_back(path + " includes Qt <" + h + ">");
      for (const auto& h : source.quoted) {
        if (h.rfind("engine/", 0) != 0) continue;
        const std::string other = folderOf(h);
        if (other != folder && !layer->second.below.count(other))
          problems.push_back(path + " includes " + h + ", but hh_" + folder + " does not build on hh_" + other);
      }
      const bool header = path.size() > 2 && path.compare(path.size() - 2, 2, ".h") == 0;
      const std::string& mode = layer->second.torch;
      if (mode == "none" || (mode == "private" && header)) {
        const auto chain = torch.chain(path);
        if (!chain.empty())
          problems.push_back("hh_" + folder + " is declared TORCH " + mode + ", but " + chain);
      }
    }
    QVERIFY2(problems.empty(), joined(problems).c_str());
  }

  void widgetsIncludeNeitherTorchNorEngine() {
    const auto tree = readTree(HH_SOURCE_DIR, {"widgets"});
    std::vector<std::string> problems;
    for (const auto& [path, source] : tree) {
      for (const auto& h : source.angled)
        if (isTorchHeader(h)) problems.push_back(path + " includes <" + h + ">");
      for (const auto& h : source.quoted)
        if (h.rfind("engine/", 0) == 0 || h.rfind("app/", 0) == 0) problems.push_back(path + " includes " + h);
    }
    QVERIFY2(problems.empty(), joined(problems).c_str());
  }

  void onlySessionsAndRunnersReachTorchInTheWorkbench() {
    const auto tree = readTree(HH_SOURCE_DIR, {"engine", "widgets", "app"});
    TorchReach torch(tree);
    static const std::regex allowed("^app/gui/(.*_(session|runner)|.*/session_[a-z_]+)\\.cpp$");
    std::map<std::string, std::set<std::string>> includers;  // gui header -> gui files including it
    for (const auto& [path, source] : tree)
      if (path.rfind("app/gui/", 0) == 0)
        for (const auto& h : source.quoted) includers[h].insert(path);
    std::vector<std::string> problems;
    int reaching = 0;
    for (const auto& [path, source] : tree) {
      if (path.rfind("app/gui/", 0) != 0) continue;
      const auto chain = torch.chain(path);
      if (chain.empty()) continue;
      ++reaching;
      const bool header = path.compare(path.size() - 2, 2, ".h") == 0;
      if (!header && !std::regex_match(path, allowed)) problems.push_back(chain);
      if (header)
        for (const auto& by : includers[path])
          if (!std::regex_match(by, allowed))
            problems.push_back(by + " includes " + path + ", which reaches Torch: " + chain);
    }
    QVERIFY2(reaching > 0, "no workbench file reaches Torch: the check reads nothing");
    QVERIFY2(problems.empty(), joined(problems).c_str());
  }

  // The checks above must be able to fail: a Torch include in a Torch-free library is caught.
  void catchesATorchIncludeWhereNoneIsAllowed() {
    std::map<std::string, Source> tree;
    tree["engine/io/a.h"].quoted = {"engine/io/b.h"};
    tree["engine/io/b.h"].angled = {"ATen/core/Tensor.h"};
    TorchReach torch(tree);
    QCOMPARE(torch.chain("engine/io/a.h"), std::string("engine/io/a.h -> engine/io/b.h -> <ATen/core/Tensor.h>"));
    QVERIFY(layers().at("io").torch == "none");
    QVERIFY2(layers().at("jobs").below.count("io"), "jobs builds on io through config and models: the closure");
  }
};

HH_TEST_SUITE(LayeringTest, "engine.layering", &LayeringTest::everyEngineFolderIsALibrary,
              &LayeringTest::engineIncludesOnlyWhatItDependsOn, &LayeringTest::widgetsIncludeNeitherTorchNorEngine,
              &LayeringTest::onlySessionsAndRunnersReachTorchInTheWorkbench,
              &LayeringTest::catchesATorchIncludeWhereNoneIsAllowed)

}  // namespace test_layering

#if HH_HAVE_QTEST
#include "test_layering.moc"
#endif

// hedgehog-workbench: the Qt desktop workbench. Sets up Torch's runtime, the light style sheet
// and the main window.
//   --convert PROJECT.json   start that conversion (the CLI's `hedgehog convert` config) on the
//                            conversion dashboard
//   --processes N            with --convert: data-parallel on N local processes (runs
//                            `hedgehog convert --nproc N` from the workbench's folder); with
//                            --run-experiment: N variants at once, each a `hedgehog experiment
//                            --only NAME` process; default 1
//   --run FILE.h5            open a run file on the dashboard (followed while it grows)
//   --run-experiment FILE.json   run an experiment's variants (the dashboard follows each; the
//                            Experiments tab shows the summary at the end)
//   --model FOLDER           open a model folder (inspector, comparison on its heads)
//   --project FILE.json      open a project file (its model; Run > Convert runs it)
//   --text TEXT | --text-file PATH   the inspector's text (inspected once the model is loaded)
//   --tab inspector | comparison | dashboard | runs   the tab shown first (another name is an error)
//   --experiment DIR [--export-figures OUT]          an experiment's results (and its PNG figures, then quit)
//   --generate ORIGINAL,CONVERTED [--prompt TEXT] [--max-tokens N]   the generation tab with both
//                            models loaded (either may be left empty); with --prompt it starts
//   --tab generation | experiments | rank            also accepted
// Hidden options for documentation and CI screenshots (scripts/screenshot.sh):
//   --screenshot PATH          grab the main window into PATH (PNG) and quit
//   --screenshot-delay-ms N    wait N ms after the first comparison is on screen (default 800)
//   --screenshot-from-start    count the delay from the start instead, whatever runs (an
//                              inspection mid-way, its bar and Cancel)
//   --rank FILE                open a saved rank.json on the Layer ranking tab
//   --columns a,b              with --experiment: only these metric columns in its table
// and the first comparison's settings: --feature-maps A,B,C --length T --head-dim D --seed S
// --bidirectional --head L,H (a model head; needs --model or --project).
#include <QAction>
#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QMessageBox>
#include <QPainter>
#include <QTimer>

#include <algorithm>
#include <clocale>
#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>

#include "app/gui/comparison/comparison_controls.h"
#include "app/gui/common/error_dialog.h"
#include "app/gui/experiments/experiment_view.h"
#include "app/gui/generation/generation_view.h"
#include "app/gui/inspector/inspector_view.h"
#include "app/gui/runs/run_browser.h"
#include "app/gui/shell/main_window.h"
#include "engine/core/runtime.h"

namespace {

constexpr int kScreenshotTimeoutMs = 120'000;  // give up waiting for the first result

QCommandLineOption hidden(const QString& name, const QString& description, const QString& value = {}) {
  QCommandLineOption option(name, description, value);
  option.setFlags(QCommandLineOption::HiddenFromHelp);
  return option;
}

QCommandLineOption visible(const QString& name, const QString& description, const QString& value = {}) {
  return QCommandLineOption(name, description, value);
}

void loadStyleSheet(QApplication& app) {
  QFile qss(QStringLiteral(":/style.qss"));
  if (qss.open(QIODevice::ReadOnly)) app.setStyleSheet(QString::fromUtf8(qss.readAll()));
}

// Every option of the command line, parsed (the header lists them).
struct CommandLine {
  QCommandLineParser parser;
  // What a user opens and starts.
  const QCommandLineOption convert = visible("convert", "Start the conversion a project file describes.", "project.json");
  const QCommandLineOption processes =
      visible("processes",
              "With --convert: run it data-parallel on N local processes; with --run-experiment: run N variants at "
              "once, each in a process of its own (default 1).",
              "N");
  const QCommandLineOption run = visible("run", "Open a run file on the dashboard.", "run.h5");
  const QCommandLineOption runExperiment =
      visible("run-experiment", "Run an experiment file's variants, then show its summary.", "experiment.json");
  const QCommandLineOption model = visible("model", "Open a model folder.", "folder");
  const QCommandLineOption project = visible("project", "Open a project file.", "project.json");
  const QCommandLineOption text = visible("text", "The inspector's text.", "text");
  const QCommandLineOption textFile = visible("text-file", "Read the inspector's text from a file.", "path");
  const QCommandLineOption tab =
      visible("tab", "First tab: inspector, comparison, dashboard, runs, experiments, generation or rank.", "name");
  const QCommandLineOption experiment = visible("experiment", "Open an experiment folder (summary.json).", "folder");
  const QCommandLineOption exportFigures = visible(
      "export-figures", "With --experiment: write its scatter, curves and maps as PNG into this folder and quit.", "folder");
  const QCommandLineOption generate =
      visible("generate", "Open the generation tab with these model folders.", "original,converted");
  const QCommandLineOption prompt = visible("prompt", "Generation prompt (starts it).", "text");
  const QCommandLineOption maxTokens = visible("max-tokens", "Tokens to generate.", "N");
  // Hidden: documentation and CI screenshots, and the first comparison's settings.
  const QCommandLineOption shot = hidden("screenshot", "Save a screenshot and quit.", "path");
  const QCommandLineOption delay = hidden("screenshot-delay-ms", "Screenshot delay.", "ms");
  const QCommandLineOption fromStart = hidden("screenshot-from-start", "Count the screenshot delay from the start.");
  const QCommandLineOption pauseAfter = hidden("pause-after-ms", "Pause the job started here after this long.", "ms");
  const QCommandLineOption featureMaps = hidden("feature-maps", "Feature maps, comma-separated.", "names");
  const QCommandLineOption inspectHead = hidden("inspect-head", "Open this head in the inspector.", "L,H");
  const QCommandLineOption inspectView = hidden("inspect-view", "softmax, linear or difference.", "view");
  const QCommandLineOption recallProbe = hidden("recall-probe", "Inspector: hide a passkey in the text once it is inspected.");
  const QCommandLineOption modelHead = hidden("head", "Compare this model head.", "L,H");
  const QCommandLineOption length = hidden("length", "Sequence length.", "T");
  const QCommandLineOption headDim = hidden("head-dim", "Head dim.", "D");
  const QCommandLineOption seed = hidden("seed", "Random seed.", "S");
  const QCommandLineOption runsTab = hidden("runs-tab", "Open on the run browser.");
  const QCommandLineOption rank = hidden("rank", "Open a saved rank.json on the Layer ranking tab.", "rank.json");
  const QCommandLineOption overlay = hidden("overlay", "Run browser: overlay these run files.", "a.h5,b.h5");
  const QCommandLineOption bidirectional = hidden("bidirectional", "Non-causal attention.");
  const QCommandLineOption scatter = hidden("scatter", "Experiment scatter axes.", "x,y");
  const QCommandLineOption curve = hidden("curve", "Experiment scalar over steps.", "name");
  const QCommandLineOption mapPair = hidden("map-pair", "Experiment snapshot pair.", "L,H");
  const QCommandLineOption columns = hidden("columns", "Experiment table: only these metric columns.", "a,b");

  explicit CommandLine(const QApplication& app) {
    parser.setApplicationDescription(QStringLiteral("Convert softmax attention into Hedgehog linear attention."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOptions({experiment, exportFigures, scatter, curve, mapPair, columns, generate, prompt, maxTokens, rank,
                       runExperiment});
    parser.addOptions({convert,     processes,   run,    model,   project,   text,          textFile,  tab,
                       runsTab,     overlay,     shot,   delay,   fromStart, featureMaps,   modelHead, inspectHead,
                       inspectView, recallProbe, length, headDim, seed,      bidirectional, pauseAfter});
    parser.process(app);
  }
  bool isSet(const QCommandLineOption& option) const { return parser.isSet(option); }
  QString value(const QCommandLineOption& option) const { return parser.value(option); }
  QStringList list(const QCommandLineOption& option) const { return value(option).split(QLatin1Char(',')); }
  // The tab shown first: --runs-tab and --overlay mean the run browser.
  QString firstTab() const { return isSet(runsTab) || isSet(overlay) ? QStringLiteral("runs") : value(tab); }
};

// "hedgehog-workbench: <error>" on stderr; the exit status 1.
int fail(const QString& error) {
  std::fprintf(stderr, "hedgehog-workbench: %s\n", qPrintable(error));
  return 1;
}

hh::gui::ComparisonSettings comparisonSettings(const CommandLine& cl) {
  hh::gui::ComparisonSettings settings;
  if (cl.isSet(cl.featureMaps)) settings.featureMaps = cl.value(cl.featureMaps).split(QLatin1Char(','), Qt::SkipEmptyParts);
  if (cl.isSet(cl.modelHead)) {
    const QStringList lh = cl.list(cl.modelHead);
    settings.modelHead = true;
    settings.layer = lh.value(0).toInt();
    settings.head = lh.value(1).toInt();
  }
  if (cl.isSet(cl.length)) settings.length = cl.value(cl.length).toInt();
  if (cl.isSet(cl.headDim)) settings.headDim = cl.value(cl.headDim).toInt();
  if (cl.isSet(cl.seed)) settings.seed = cl.value(cl.seed).toULongLong();
  settings.causal = !cl.isSet(cl.bidirectional);
  return settings;
}

// The inspector's text (--text, --text-file); an error when the file cannot be read.
QString setInspectorText(hh::gui::MainWindow& window, const CommandLine& cl) {
  if (cl.isSet(cl.text)) window.inspector()->setText(cl.value(cl.text));
  if (!cl.isSet(cl.textFile)) return {};
  QFile file(cl.value(cl.textFile));
  if (!file.open(QIODevice::ReadOnly))
    return QStringLiteral("cannot read %1: %2").arg(cl.value(cl.textFile), file.errorString());
  window.inspector()->setText(QString::fromUtf8(file.readAll()));
  return {};
}

// What runs once the model's text is inspected: the head to show, the recall probe, the model
// head to compare.
void followInspection(hh::gui::MainWindow& window, const CommandLine& cl, const hh::gui::ComparisonSettings& settings) {
  auto* inspector = window.inspector();
  auto once = [&](auto action) {
    QObject::connect(inspector, &hh::gui::InspectorView::inspected, &window, action, Qt::SingleShotConnection);
  };
  if (cl.isSet(cl.inspectHead) || cl.isSet(cl.inspectView)) {
    const int view = QStringList{"softmax", "linear", "difference"}.indexOf(cl.value(cl.inspectView));
    if (view > 0) inspector->setHeadView(view);
    const QStringList lh = cl.list(cl.inspectHead);
    if (cl.isSet(cl.inspectHead)) once([inspector, lh] { inspector->showHead(lh.value(0).toInt(), lh.value(1).toInt()); });
  }
  if (cl.isSet(cl.recallProbe)) once([inspector] { inspector->runRecallProbe(); });
  if (settings.modelHead) {
    auto* controls = window.comparisonControls();
    once([controls, settings] { controls->showModelHead(settings.layer, settings.head); });
  }
}

// --convert (with --processes), --run-experiment or --run on the dashboard.
QString startConversionOrRun(hh::gui::MainWindow& window, const CommandLine& cl) {
  bool ok = true;
  const int count = cl.isSet(cl.processes) ? cl.value(cl.processes).toInt(&ok) : 1;
  if (!ok || count < 1) return QStringLiteral("--processes %1: not a positive number").arg(cl.value(cl.processes));
  if (cl.isSet(cl.pauseAfter))  // the Pause action, as a user would press it
    QTimer::singleShot(cl.value(cl.pauseAfter).toInt(), &window, [&window] {
      if (auto* pause = window.findChild<QAction*>(QStringLiteral("pauseJobAction")); pause && pause->isEnabled())
        pause->trigger();
    });
  if (cl.isSet(cl.convert)) return window.startConversion(cl.value(cl.convert), count);
  if (cl.isSet(cl.runExperiment)) return window.startExperiment(cl.value(cl.runExperiment), count);
  if (cl.isSet(cl.run)) window.openRun(cl.value(cl.run));
  return {};
}

// --experiment with its view settings, and its figures written with --export-figures.
QString openExperiment(hh::gui::MainWindow& window, const CommandLine& cl) {
  QString error = window.openExperiment(cl.value(cl.experiment));
  auto* view = window.experiments();
  const QStringList xy = cl.list(cl.scatter), lh = cl.list(cl.mapPair);
  if (error.isEmpty() && cl.isSet(cl.scatter) && !view->setScatterAxes(xy.value(0), xy.value(1)))
    error = QStringLiteral("--scatter %1: not metrics the variants have").arg(cl.value(cl.scatter));
  if (error.isEmpty() && cl.isSet(cl.curve) && !view->setCurveScalar(cl.value(cl.curve)))
    error = QStringLiteral("--curve %1: no such scalar").arg(cl.value(cl.curve));
  if (error.isEmpty() && cl.isSet(cl.mapPair) && !view->setMapPair(lh.value(0).toInt(), lh.value(1).toInt()))
    error = QStringLiteral("--map-pair %1: no snapshots of that head").arg(cl.value(cl.mapPair));
  if (error.isEmpty() && cl.isSet(cl.columns) && !view->showOnlyMetricColumns(cl.list(cl.columns)))
    error = QStringLiteral("--columns %1: not metrics the variants have").arg(cl.value(cl.columns));
  if (error.isEmpty() && cl.isSet(cl.exportFigures)) error = view->exportFigures(cl.value(cl.exportFigures));
  return error;
}

// The first tab, then a saved ranking (--rank) on its tab.
QString showFirstTab(hh::gui::MainWindow& window, const CommandLine& cl) {
  const QString first = cl.firstTab();
  if (cl.isSet(cl.overlay)) window.runBrowser()->overlayRuns(cl.list(cl.overlay));
  if (first == QLatin1String("runs")) window.showRuns();
  else if (first == QLatin1String("dashboard")) window.showDashboard();
  else if (first == QLatin1String("comparison")) window.showComparison();
  else if (first == QLatin1String("inspector")) window.showInspector();
  else if (first == QLatin1String("experiments")) window.showExperiments();
  else if (first == QLatin1String("rank")) window.showRank();
  if (!cl.isSet(cl.rank)) return {};
  const QString error = window.openRanking(cl.value(cl.rank));
  return error.isEmpty() ? error : QStringLiteral("--rank ") + error;
}

// The generation tab (--generate, or --tab generation) with its models and settings; true when
// --prompt started a generation.
bool openGeneration(hh::gui::MainWindow& window, const CommandLine& cl) {
  if (!cl.isSet(cl.generate) && cl.firstTab() != QLatin1String("generation")) return false;
  window.showGeneration();
  auto* panel = window.generation();
  const QStringList folders = cl.list(cl.generate);
  panel->setFolders(folders.value(0), folders.value(1));
  if (cl.isSet(cl.generate)) panel->loadModels();
  auto settings = panel->settings();
  if (cl.isSet(cl.maxTokens)) settings.maxTokens = cl.value(cl.maxTokens).toInt();
  if (cl.isSet(cl.prompt)) settings.prompt = cl.value(cl.prompt);
  panel->setSettings(settings);
  panel->setPrompt(settings.prompt);
  if (!cl.isSet(cl.prompt)) return false;
  QTimer::singleShot(0, panel, [panel] { panel->generate(); });
  return true;
}

// Grabs the main window into `path` and quits (status 0 when saved). An error dialog on screen is
// part of the picture: it is drawn over the window where it stands.
void grabAndQuit(hh::gui::MainWindow& window, const QString& path) {
  QPixmap picture = window.grab();
  QPainter painter(&picture);
  for (QMessageBox* box : window.findChildren<QMessageBox*>(QLatin1String(hh::gui::kErrorDialogName)))
    if (box->isVisible()) painter.drawPixmap(box->geometry().topLeft() - window.geometry().topLeft(), box->grab());
  painter.end();
  const bool ok = picture.save(path);
  std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "screenshot saved to" : "could not save screenshot to", qPrintable(path));
  QApplication::exit(ok ? 0 : 1);
}

// Calls `then` once nothing is loading or computing (the model loaded, the text inspected, the
// comparison on screen). A model that fails to load ends the wait too: its error dialog is the
// picture.
void whenSettled(hh::gui::MainWindow& window, bool needModel, const std::function<void()>& then) {
  auto* poll = new QTimer(&window);
  auto loadFailed = std::make_shared<bool>(false);
  QObject::connect(&window, &hh::gui::MainWindow::modelLoaded, &window,
                   [loadFailed](const QString& error) { *loadFailed = *loadFailed || !error.isEmpty(); });
  QObject::connect(poll, &QTimer::timeout, &window, [&window, poll, needModel, loadFailed, then] {
    const auto& result = window.inspector()->result();
    const bool ready = !window.busy() && (!needModel || *loadFailed || result.length > 0 || !result.error.isEmpty());
    if (!ready) return;
    poll->stop();
    then();
  });
  poll->start(250);
}

// --screenshot: the dashboard is grabbed after the delay (e.g. mid-run), a generation once it has
// finished and the delay has let the plots redraw, anything else the delay after it settled.
void scheduleScreenshot(hh::gui::MainWindow& window, const CommandLine& cl, bool generating) {
  const QString path = cl.value(cl.shot);
  const int delayMs = cl.isSet(cl.delay) ? cl.value(cl.delay).toInt() : 800;
  const QString first = cl.firstTab();
  const bool onDashboard = cl.isSet(cl.fromStart) || cl.isSet(cl.convert) || cl.isSet(cl.run) || cl.isSet(cl.rank) ||
                           cl.isSet(cl.runExperiment) || first == QLatin1String("runs") ||
                           first == QLatin1String("dashboard") || first == QLatin1String("rank");
  auto grab = [&window, path] { grabAndQuit(window, path); };
  auto grabLater = [&window, delayMs, grab] { QTimer::singleShot(delayMs, &window, grab); };
  if (generating)
    QObject::connect(window.generation(), &hh::gui::GenerationView::finished, &window, [grabLater](const QString&) { grabLater(); });
  else if (onDashboard) grabLater();
  else whenSettled(window, cl.isSet(cl.model) || cl.isSet(cl.project), grabLater);
  QTimer::singleShot(std::max(kScreenshotTimeoutMs, delayMs + 60000), &window, [grab] {
    std::fprintf(stderr, "no comparison within %d ms; grabbing anyway\n", kScreenshotTimeoutMs);
    grab();
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit a write must fail with EFBIG and be reported like a full disk, not
  // kill the workbench with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  QApplication app(argc, argv);
  // QApplication set every locale category from the environment; the engine's C-library number
  // reading and writing (strtod, printf) must follow the CLI's "C", not a de_DE decimal comma
  // (Qt's advice: QCoreApplication's "Locale settings").
  std::setlocale(LC_NUMERIC, "C");
  QApplication::setApplicationName(QStringLiteral("Hedgehog Workbench"));
  QApplication::setOrganizationName(QStringLiteral("Hedgehog"));
  QApplication::setApplicationVersion(QString::fromLatin1(hh::engineVersion()));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/hedgehog.svg")));
  hh::initRuntime();

  const CommandLine cl(app);
  const QStringList tabs{"inspector", "comparison", "dashboard", "runs", "experiments", "generation", "rank"};
  if (cl.isSet(cl.tab) && !tabs.contains(cl.value(cl.tab))) {
    std::fprintf(stderr, "hedgehog-workbench: --tab %s: not a tab (one of %s)\n", qPrintable(cl.value(cl.tab)),
                 qPrintable(tabs.join(QStringLiteral(", "))));
    return 2;
  }
  if (cl.isSet(cl.maxTokens)) {  // the spin box would clamp a bad value to 1 without a word
    bool ok = false;
    const int tokens = cl.value(cl.maxTokens).toInt(&ok);
    if (!ok || tokens < 1) {
      std::fprintf(stderr, "hedgehog-workbench: --max-tokens %s: not a positive number\n",
                   qPrintable(cl.value(cl.maxTokens)));
      return 2;
    }
  }
  loadStyleSheet(app);
  hh::gui::MainWindow window;
  const auto settings = comparisonSettings(cl);
  window.setSettings(settings);
  if (const QString error = setInspectorText(window, cl); !error.isEmpty()) return fail(error);
  window.show();
  if (cl.isSet(cl.project)) {
    if (const QString error = window.openProject(cl.value(cl.project)); !error.isEmpty()) return fail(error);
  } else if (cl.isSet(cl.model)) {
    window.openModel(cl.value(cl.model));
  }
  followInspection(window, cl, settings);
  if (const QString error = startConversionOrRun(window, cl); !error.isEmpty()) return fail(error);
  if (cl.isSet(cl.experiment)) {
    if (const QString error = openExperiment(window, cl); !error.isEmpty()) return fail(error);
    if (cl.isSet(cl.exportFigures)) {
      std::printf("figures written to %s\n", qPrintable(cl.value(cl.exportFigures)));
      return 0;
    }
  }
  if (const QString error = showFirstTab(window, cl); !error.isEmpty()) return fail(error);
  const bool generating = openGeneration(window, cl);
  if (cl.isSet(cl.shot)) scheduleScreenshot(window, cl, generating);
  return app.exec();
}

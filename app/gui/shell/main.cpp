// hedgehog-workbench: the Qt desktop workbench. Sets up Torch's runtime, the light style sheet
// and the main window.
//   --convert PROJECT.json   start that conversion (the CLI's `hedgehog convert` config) on the
//                            conversion dashboard
//   --processes N            with --convert: data-parallel on N local processes (runs
//                            `hedgehog convert --nproc N` from the workbench's folder); default 1
//   --run FILE.h5            open a run file on the dashboard (followed while it grows)
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
//   --rank FILE                open a saved rank.json on the Layer ranking tab
// and the first comparison's settings: --feature-maps A,B,C --length T --head-dim D --seed S
// --bidirectional --head L,H (a model head; needs --model or --project).
#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QMessageBox>
#include <QPainter>
#include <QTimer>

#include <memory>

#include <algorithm>
#include <csignal>
#include <cstdio>

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

void loadStyleSheet(QApplication& app) {
  QFile qss(QStringLiteral(":/style.qss"));
  if (qss.open(QIODevice::ReadOnly)) app.setStyleSheet(QString::fromUtf8(qss.readAll()));
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit a write must fail with EFBIG and be reported like a full disk, not
  // kill the workbench with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Hedgehog Workbench"));
  QApplication::setOrganizationName(QStringLiteral("Hedgehog"));
  QApplication::setApplicationVersion(QString::fromLatin1(hh::engineVersion()));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/hedgehog.svg")));
  hh::initRuntime();

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Convert softmax attention into Hedgehog linear attention."));
  parser.addHelpOption();
  parser.addVersionOption();
  const auto shot = hidden(QStringLiteral("screenshot"), QStringLiteral("Save a screenshot and quit."), "path");
  const auto delay = hidden(QStringLiteral("screenshot-delay-ms"), QStringLiteral("Screenshot delay."), "ms");
  const auto featureMap = hidden(QStringLiteral("feature-maps"), QStringLiteral("Feature maps, comma-separated."), "names");
  const auto inspectHead = hidden(QStringLiteral("inspect-head"), QStringLiteral("Open this head in the inspector."), "L,H");
  const auto inspectView = hidden(QStringLiteral("inspect-view"), QStringLiteral("softmax, linear or difference."), "view");
  QCommandLineOption recallProbe(QStringLiteral("recall-probe"),
                                 QStringLiteral("Inspector: hide a passkey in the text once it is inspected."));
  recallProbe.setFlags(QCommandLineOption::HiddenFromHelp);
  const auto modelHead = hidden(QStringLiteral("head"), QStringLiteral("Compare this model head."), "L,H");
  const auto length = hidden(QStringLiteral("length"), QStringLiteral("Sequence length."), "T");
  const auto headDim = hidden(QStringLiteral("head-dim"), QStringLiteral("Head dim."), "D");
  const auto seed = hidden(QStringLiteral("seed"), QStringLiteral("Random seed."), "S");
  const auto runsTab = hidden(QStringLiteral("runs-tab"), QStringLiteral("Open on the run browser."));
  const auto rankOpt = hidden(QStringLiteral("rank"), QStringLiteral("Open a saved rank.json on the Layer ranking tab."), "rank.json");
  const auto overlayOpt = hidden(QStringLiteral("overlay"), QStringLiteral("Run browser: overlay these run files."), "a.h5,b.h5");
  const auto bidirectional = hidden(QStringLiteral("bidirectional"), QStringLiteral("Non-causal attention."));
  const QCommandLineOption generateOpt(QStringLiteral("generate"),
                                       QStringLiteral("Open the generation tab with these model folders."),
                                       QStringLiteral("original,converted"));
  const QCommandLineOption promptOpt(QStringLiteral("prompt"), QStringLiteral("Generation prompt (starts it)."),
                                     QStringLiteral("text"));
  const QCommandLineOption maxTokensOpt(QStringLiteral("max-tokens"), QStringLiteral("Tokens to generate."),
                                        QStringLiteral("N"));
  const QCommandLineOption convert(QStringLiteral("convert"), QStringLiteral("Start the conversion a project file describes."),
                                   QStringLiteral("project.json"));
  const QCommandLineOption processes(QStringLiteral("processes"),
                                     QStringLiteral("With --convert: run it data-parallel on N local processes (default 1)."),
                                     QStringLiteral("N"));
  const QCommandLineOption run(QStringLiteral("run"), QStringLiteral("Open a run file on the dashboard."), QStringLiteral("run.h5"));
  const QCommandLineOption model(QStringLiteral("model"), QStringLiteral("Open a model folder."), QStringLiteral("folder"));
  const QCommandLineOption project(QStringLiteral("project"), QStringLiteral("Open a project file."), QStringLiteral("project.json"));
  const QCommandLineOption text(QStringLiteral("text"), QStringLiteral("The inspector's text."), QStringLiteral("text"));
  const QCommandLineOption textFile(QStringLiteral("text-file"), QStringLiteral("Read the inspector's text from a file."),
                                    QStringLiteral("path"));
  const QCommandLineOption tab(QStringLiteral("tab"), QStringLiteral("First tab: inspector, comparison, dashboard, runs, experiments, generation or rank."),
                               QStringLiteral("name"));
  const QCommandLineOption experiment(QStringLiteral("experiment"), QStringLiteral("Open an experiment folder (summary.json)."),
                                      QStringLiteral("folder"));
  const QCommandLineOption exportFigures(QStringLiteral("export-figures"),
                                         QStringLiteral("With --experiment: write its scatter, curves and maps as PNG into this folder and quit."),
                                         QStringLiteral("folder"));
  const auto scatter = hidden(QStringLiteral("scatter"), QStringLiteral("Experiment scatter axes."), "x,y");
  const auto curve = hidden(QStringLiteral("curve"), QStringLiteral("Experiment scalar over steps."), "name");
  const auto mapPair = hidden(QStringLiteral("map-pair"), QStringLiteral("Experiment snapshot pair."), "L,H");
  parser.addOptions({experiment, exportFigures, scatter, curve, mapPair, generateOpt, promptOpt, maxTokensOpt, rankOpt});
  parser.addOptions({convert, processes, run, model, project, text, textFile, tab, runsTab, overlayOpt, shot, delay, featureMap, modelHead,
                     inspectHead, inspectView, recallProbe,
                     length, headDim, seed, bidirectional});
  parser.process(app);
  const QStringList tabs{"inspector", "comparison", "dashboard", "runs", "experiments", "generation", "rank"};
  if (parser.isSet(tab) && !tabs.contains(parser.value(tab))) {
    std::fprintf(stderr, "hedgehog-workbench: --tab %s: not a tab (one of %s)\n", qPrintable(parser.value(tab)),
                 qPrintable(tabs.join(QStringLiteral(", "))));
    return 2;
  }

  loadStyleSheet(app);
  hh::gui::MainWindow window;
  hh::gui::ComparisonSettings settings;
  if (parser.isSet(featureMap)) settings.featureMaps = parser.value(featureMap).split(QLatin1Char(','), Qt::SkipEmptyParts);
  if (parser.isSet(modelHead)) {
    const QStringList lh = parser.value(modelHead).split(QLatin1Char(','));
    settings.modelHead = true;
    settings.layer = lh.value(0).toInt();
    settings.head = lh.value(1).toInt();
  }
  if (parser.isSet(length)) settings.length = parser.value(length).toInt();
  if (parser.isSet(headDim)) settings.headDim = parser.value(headDim).toInt();
  if (parser.isSet(seed)) settings.seed = parser.value(seed).toULongLong();
  settings.causal = !parser.isSet(bidirectional);
  window.setSettings(settings);
  if (parser.isSet(text)) window.inspector()->setText(parser.value(text));
  if (parser.isSet(textFile)) {
    QFile file(parser.value(textFile));
    if (!file.open(QIODevice::ReadOnly)) {
      std::fprintf(stderr, "hedgehog-workbench: cannot read %s\n", qPrintable(parser.value(textFile)));
      return 1;
    }
    window.inspector()->setText(QString::fromUtf8(file.readAll()));
  }
  window.show();
  if (parser.isSet(project)) {
    const QString error = window.openProject(parser.value(project));
    if (!error.isEmpty()) {
      std::fprintf(stderr, "hedgehog-workbench: %s\n", qPrintable(error));
      return 1;
    }
  } else if (parser.isSet(model)) {
    window.openModel(parser.value(model));
  }
  if (parser.isSet(inspectHead) || parser.isSet(inspectView)) {
    const QStringList lh = parser.value(inspectHead).split(QLatin1Char(','));
    const int view = QStringList{"softmax", "linear", "difference"}.indexOf(parser.value(inspectView));
    if (view > 0) window.inspector()->setHeadView(view);
    if (parser.isSet(inspectHead)) {
      QObject::connect(window.inspector(), &hh::gui::InspectorView::inspected, &window, [&window, lh] {
        window.inspector()->showHead(lh.value(0).toInt(), lh.value(1).toInt());
      }, Qt::SingleShotConnection);
    }
  }
  if (parser.isSet(recallProbe)) {
    QObject::connect(window.inspector(), &hh::gui::InspectorView::inspected, &window,
                     [&window] { window.inspector()->runRecallProbe(); }, Qt::SingleShotConnection);
  }
  if (settings.modelHead) {
    // Compare the model head once the model is loaded and the text inspected.
    QObject::connect(window.inspector(), &hh::gui::InspectorView::inspected, &window, [&window, settings] {
      window.comparisonControls()->showModelHead(settings.layer, settings.head);
    }, Qt::SingleShotConnection);
  }
  if (parser.isSet(convert)) {
    bool ok = true;
    const int count = parser.isSet(processes) ? parser.value(processes).toInt(&ok) : 1;
    if (!ok || count < 1) {
      std::fprintf(stderr, "hedgehog-workbench: --processes %s: not a positive number\n", qPrintable(parser.value(processes)));
      return 1;
    }
    const QString error = window.startConversion(parser.value(convert), count);
    if (!error.isEmpty()) {
      std::fprintf(stderr, "hedgehog-workbench: %s\n", qPrintable(error));
      return 1;
    }
  } else if (parser.isSet(run)) {
    window.openRun(parser.value(run));
  }
  if (parser.isSet(experiment)) {
    QString error = window.openExperiment(parser.value(experiment));
    const QStringList xy = parser.value(scatter).split(QLatin1Char(','));
    if (error.isEmpty() && parser.isSet(scatter) && !window.experiments()->setScatterAxes(xy.value(0), xy.value(1)))
      error = QStringLiteral("--scatter %1: not metrics every variant has").arg(parser.value(scatter));
    if (error.isEmpty() && parser.isSet(curve) && !window.experiments()->setCurveScalar(parser.value(curve)))
      error = QStringLiteral("--curve %1: no such scalar").arg(parser.value(curve));
    const QStringList lh = parser.value(mapPair).split(QLatin1Char(','));
    if (error.isEmpty() && parser.isSet(mapPair) && !window.experiments()->setMapPair(lh.value(0).toInt(), lh.value(1).toInt()))
      error = QStringLiteral("--map-pair %1: no snapshots of that head").arg(parser.value(mapPair));
    if (error.isEmpty() && parser.isSet(exportFigures)) error = window.experiments()->exportFigures(parser.value(exportFigures));
    if (!error.isEmpty()) {
      std::fprintf(stderr, "hedgehog-workbench: %s\n", qPrintable(error));
      return 1;
    }
    if (parser.isSet(exportFigures)) {
      std::printf("figures written to %s\n", qPrintable(parser.value(exportFigures)));
      return 0;
    }
  }
  const QString firstTab = parser.isSet(runsTab) || parser.isSet(overlayOpt) ? QStringLiteral("runs") : parser.value(tab);
  if (parser.isSet(overlayOpt)) window.runBrowser()->overlayRuns(parser.value(overlayOpt).split(QLatin1Char(',')));
  if (firstTab == QLatin1String("runs")) window.showRuns();
  else if (firstTab == QLatin1String("dashboard")) window.showDashboard();
  else if (firstTab == QLatin1String("comparison")) window.showComparison();
  else if (firstTab == QLatin1String("inspector")) window.showInspector();
  else if (firstTab == QLatin1String("experiments")) window.showExperiments();
  else if (firstTab == QLatin1String("rank")) window.showRank();
  if (parser.isSet(rankOpt)) {
    const QString error = window.openRanking(parser.value(rankOpt));
    if (!error.isEmpty()) {
      std::fprintf(stderr, "hedgehog-workbench: --rank %s\n", qPrintable(error));
      return 1;
    }
  }
  bool generating = false;
  if (parser.isSet(generateOpt) || firstTab == QLatin1String("generation")) {
    window.showGeneration();
    auto* panel = window.generation();
    const QStringList folders = parser.value(generateOpt).split(QLatin1Char(','));
    panel->setFolders(folders.value(0), folders.value(1));
    if (parser.isSet(generateOpt)) panel->loadModels();
    auto settings = panel->settings();
    if (parser.isSet(maxTokensOpt)) settings.maxTokens = parser.value(maxTokensOpt).toInt();
    if (parser.isSet(promptOpt)) settings.prompt = parser.value(promptOpt);
    panel->setSettings(settings);
    panel->setPrompt(settings.prompt);
    if (parser.isSet(promptOpt)) {
      generating = true;
      QTimer::singleShot(0, panel, [panel] { panel->generate(); });
    }
  }
  const bool onDashboard = parser.isSet(convert) || parser.isSet(run) || firstTab == QLatin1String("runs") ||
                           firstTab == QLatin1String("dashboard") || firstTab == QLatin1String("rank") ||
                           parser.isSet(rankOpt);

  if (parser.isSet(shot)) {
    const QString path = parser.value(shot);
    const int delayMs = parser.isSet(delay) ? parser.value(delay).toInt() : 800;
    auto grab = [&window, path] {
      // An error dialog on screen is part of the picture: draw it over the window where it stands.
      QPixmap picture = window.grab();
      QPainter painter(&picture);
      for (QMessageBox* box : window.findChildren<QMessageBox*>(QLatin1String(hh::gui::kErrorDialogName)))
        if (box->isVisible()) painter.drawPixmap(box->geometry().topLeft() - window.geometry().topLeft(), box->grab());
      painter.end();
      const bool ok = picture.save(path);
      std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "screenshot saved to" : "could not save screenshot to",
                   qPrintable(path));
      QApplication::exit(ok ? 0 : 1);
    };
    // The dashboard: grab after the delay (e.g. mid-run). Otherwise: once nothing is loading or
    // computing (the model loaded, the text inspected, the comparison on screen), wait, grab, quit.
    if (generating) {
      // Grab once the generation has finished (then the delay lets the plots redraw).
      QObject::connect(window.generation(), &hh::gui::GenerationView::finished, &window,
                       [&window, delayMs, grab](const QString&) { QTimer::singleShot(delayMs, &window, grab); });
    } else if (onDashboard) {
      QTimer::singleShot(delayMs, &window, grab);
    } else {
      auto* poll = new QTimer(&window);
      const bool needModel = parser.isSet(model) || parser.isSet(project);
      // A model that fails to load ends the wait too: its error dialog is the picture.
      auto loadFailed = std::make_shared<bool>(false);
      QObject::connect(&window, &hh::gui::MainWindow::modelLoaded, &window,
                       [loadFailed](const QString& error) { *loadFailed = *loadFailed || !error.isEmpty(); });
      QObject::connect(poll, &QTimer::timeout, &window, [&window, poll, delayMs, grab, needModel, loadFailed] {
        const bool ready = !window.busy() && (!needModel || *loadFailed || window.inspector()->result().length > 0 ||
                                              !window.inspector()->result().error.isEmpty());
        if (!ready) return;
        poll->stop();
        QTimer::singleShot(delayMs, &window, grab);
      });
      poll->start(250);
    }
    QTimer::singleShot(std::max(kScreenshotTimeoutMs, delayMs + 60000), &window, [grab] {
      std::fprintf(stderr, "no comparison within %d ms; grabbing anyway\n", kScreenshotTimeoutMs);
      grab();
    });
  }
  return app.exec();
}

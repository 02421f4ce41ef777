// hedgehog-workbench: the Qt desktop workbench. Sets up Torch's runtime, the light style sheet
// and the main window.
//   --convert PROJECT.json   start that conversion (the CLI's `hedgehog convert` config) on the
//                            conversion dashboard
//   --run FILE.h5            open a run file on the dashboard (followed while it grows)
// Hidden options for documentation and CI screenshots (scripts/screenshot.sh):
//   --screenshot PATH          grab the main window into PATH (PNG) and quit
//   --screenshot-delay-ms N    wait N ms after the first comparison is on screen (default 800)
// and the first comparison's settings: --feature-map NAME --length T --head-dim D --seed S
// --bidirectional.
#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QTimer>

#include <algorithm>
#include <cstdio>

#include "app/gui/main_window.h"
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
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("Hedgehog Workbench"));
  QApplication::setApplicationVersion(QString::fromLatin1(hh::engineVersion()));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/hedgehog.svg")));
  hh::initRuntime();

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Convert softmax attention into Hedgehog linear attention."));
  parser.addHelpOption();
  parser.addVersionOption();
  const auto shot = hidden(QStringLiteral("screenshot"), QStringLiteral("Save a screenshot and quit."), "path");
  const auto delay = hidden(QStringLiteral("screenshot-delay-ms"), QStringLiteral("Screenshot delay."), "ms");
  const auto featureMap = hidden(QStringLiteral("feature-map"), QStringLiteral("Feature map."), "name");
  const auto length = hidden(QStringLiteral("length"), QStringLiteral("Sequence length."), "T");
  const auto headDim = hidden(QStringLiteral("head-dim"), QStringLiteral("Head dim."), "D");
  const auto seed = hidden(QStringLiteral("seed"), QStringLiteral("Random seed."), "S");
  const auto runsTab = hidden(QStringLiteral("runs-tab"), QStringLiteral("Open on the run browser."));
  const auto bidirectional = hidden(QStringLiteral("bidirectional"), QStringLiteral("Non-causal attention."));
  const QCommandLineOption convert(QStringLiteral("convert"), QStringLiteral("Start the conversion a project file describes."),
                                   QStringLiteral("project.json"));
  const QCommandLineOption run(QStringLiteral("run"), QStringLiteral("Open a run file on the dashboard."), QStringLiteral("run.h5"));
  parser.addOptions({convert, run, runsTab, shot, delay, featureMap, length, headDim, seed, bidirectional});
  parser.process(app);

  loadStyleSheet(app);
  hh::gui::MainWindow window;
  hh::gui::ComparisonSettings settings;
  if (parser.isSet(featureMap)) settings.featureMap = parser.value(featureMap);
  if (parser.isSet(length)) settings.length = parser.value(length).toInt();
  if (parser.isSet(headDim)) settings.headDim = parser.value(headDim).toInt();
  if (parser.isSet(seed)) settings.seed = parser.value(seed).toULongLong();
  settings.causal = !parser.isSet(bidirectional);
  window.setSettings(settings);
  window.show();
  if (parser.isSet(convert)) {
    const QString error = window.startConversion(parser.value(convert));
    if (!error.isEmpty()) {
      std::fprintf(stderr, "hedgehog-workbench: %s\n", qPrintable(error));
      return 1;
    }
  } else if (parser.isSet(run)) {
    window.openRun(parser.value(run));
  }
  if (parser.isSet(runsTab)) window.showRuns();
  const bool onDashboard = parser.isSet(convert) || parser.isSet(run) || parser.isSet(runsTab);

  if (parser.isSet(shot)) {
    const QString path = parser.value(shot);
    const int delayMs = parser.isSet(delay) ? parser.value(delay).toInt() : 800;
    auto grab = [&window, path] {
      const bool ok = window.grab().save(path);
      std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "screenshot saved to" : "could not save screenshot to",
                   qPrintable(path));
      QApplication::exit(ok ? 0 : 1);
    };
    // The dashboard: grab after the delay (e.g. mid-run). The comparison: after the first result
    // is on screen (and nothing newer is pending), wait, grab, quit.
    if (onDashboard) {
      QTimer::singleShot(delayMs, &window, grab);
    } else {
      QObject::connect(&window, &hh::gui::MainWindow::comparisonReady, &window, [&window, delayMs, grab] {
        if (!window.busy()) QTimer::singleShot(delayMs, &window, grab);
      });
    }
    QTimer::singleShot(std::max(kScreenshotTimeoutMs, delayMs + 60000), &window, [grab] {
      std::fprintf(stderr, "no comparison within %d ms; grabbing anyway\n", kScreenshotTimeoutMs);
      grab();
    });
  }
  return app.exec();
}

// hedgehog-workbench: the Qt desktop workbench. Sets up Torch's runtime, the light style sheet
// and the main window.
// Hidden options for documentation and CI screenshots (scripts/screenshot.sh):
//   --screenshot PATH          grab the main window into PATH (PNG) and quit
//   --screenshot-delay-ms N    wait N ms after the first comparison is on screen (default 800)
// and the first comparison's settings: --feature-map NAME --length T --head-dim D --seed S
// --bidirectional.
#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QTimer>

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
  const auto bidirectional = hidden(QStringLiteral("bidirectional"), QStringLiteral("Non-causal attention."));
  parser.addOptions({shot, delay, featureMap, length, headDim, seed, bidirectional});
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

  if (parser.isSet(shot)) {
    const QString path = parser.value(shot);
    const int delayMs = parser.isSet(delay) ? parser.value(delay).toInt() : 800;
    auto grab = [&window, path] {
      const bool ok = window.grab().save(path);
      std::fprintf(ok ? stdout : stderr, "%s %s\n", ok ? "screenshot saved to" : "could not save screenshot to",
                   qPrintable(path));
      QApplication::exit(ok ? 0 : 1);
    };
    // After the first result is on screen (and nothing newer is pending), wait, grab, quit.
    QObject::connect(&window, &hh::gui::MainWindow::comparisonReady, &window, [&window, delayMs, grab] {
      if (!window.busy()) QTimer::singleShot(delayMs, &window, grab);
    });
    QTimer::singleShot(kScreenshotTimeoutMs, &window, [grab] {
      std::fprintf(stderr, "no comparison within %d ms; grabbing anyway\n", kScreenshotTimeoutMs);
      grab();
    });
  }
  return app.exec();
}

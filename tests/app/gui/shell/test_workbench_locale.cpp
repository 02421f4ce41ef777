// app.gui.workbench_locale: the workbench reads numbers as the CLI does whatever the user's locale.
// QApplication sets every locale category from the environment; the workbench sets LC_NUMERIC
// back to "C", so under a comma-decimal LANG a project with "exp_t=0.5" opens (it reaches the
// missing-model check) and one with "exp_t=0,5" is refused, as `hedgehog convert --config`
// refuses it. Runs the built hedgehog-workbench (beside the CLI) with --project; skipped when it
// is not built; a comma-decimal locale is generated when none is installed
// (tests/support/comma_locale.h).
#include <locale.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTest>

#include <string>

#include "tests/support/comma_locale.h"
#include "tests/support/hh_test.h"
#include "tests/support/temp_dir.h"

namespace test_workbench_locale {

namespace {


QString workbenchBinary() {
  if (QString(HH_CLI_BINARY).isEmpty()) return {};
  const QString path = QFileInfo(QStringLiteral(HH_CLI_BINARY)).dir().filePath(QStringLiteral("hedgehog-workbench"));
  return QFileInfo(path).isExecutable() ? path : QString();
}

// Runs the workbench on a project whose feature map is `map` and no model, under `locale`;
// returns what it wrote to stderr (it exits 1 either way: the project has no model).
QString openProjectUnder(const QString& binary, const QString& locale, const hh::test::TempDir& dir, const char* map) {
  const QString project = QString::fromStdString(dir.file("project.json"));
  QFile file(project);
  if (!file.open(QIODevice::WriteOnly)) return QStringLiteral("cannot write ") + project;
  file.write(QByteArray("{\"feature_map\": \"") + map + "\", \"model\": \"\"}\n");
  file.close();
  QProcess process;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("LC_ALL"), locale);
  env.insert(QStringLiteral("LANG"), locale);
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  env.insert(QStringLiteral("HOME"), QString::fromStdString(dir.path()));
  env.insert(QStringLiteral("XDG_CONFIG_HOME"), QString::fromStdString(dir.file("config")));
  process.setProcessEnvironment(env);
  process.start(binary, {QStringLiteral("--project"), project});
  if (!process.waitForFinished(120000)) return QStringLiteral("the workbench did not exit");
  return QString::fromLocal8Bit(process.readAllStandardError());
}

}  // namespace

class TestWorkbenchLocale : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void projectNumbersFollowTheCli() {
    const QString binary = workbenchBinary();
    if (binary.isEmpty()) QSKIP("hedgehog-workbench is not built beside the CLI");
    const QString locale = QString::fromStdString(hh::test::commaDecimalLocale());
    if (locale.isEmpty())
      QSKIP("no comma-decimal locale installed, and none could be generated (the locales package)");
    hh::test::TempDir dir("workbench_locale");
    const QString point = openProjectUnder(binary, locale, dir, "exp_t=0.5");
    QVERIFY2(point.contains(QStringLiteral("no \"model\"")), qPrintable(point));
    const QString comma = openProjectUnder(binary, locale, dir, "exp_t=0,5");
    QVERIFY2(comma.contains(QStringLiteral("t must be a positive number")), qPrintable(comma));
  }
};

HH_TEST_SUITE(TestWorkbenchLocale, "app.gui.workbench_locale", &TestWorkbenchLocale::projectNumbersFollowTheCli)

}  // namespace test_workbench_locale

#if HH_HAVE_QTEST
#include "test_workbench_locale.moc"
#endif

#include "app/gui/runs/run_browser.h"

#include <QDateTime>
#include <QDirIterator>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "app/gui/common/error_dialog.h"
#include "app/gui/runs/run_overlay.h"
#include "app/gui/runs/run_table_csv.h"
#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"

namespace hh::gui {
namespace {

enum BrowserColumn { kFile, kKind, kStatus, kStarted, kModel, kFeatureMap, kSteps, kFirstMetric };

QString configString(const nlohmann::json& config, const char* key) {
  if (config.is_object() && config.contains(key) && config.at(key).is_string())
    return QString::fromStdString(config.at(key).get<std::string>());
  return {};
}

// What a run's model column says: its model folder, or for a model trained from scratch (a train
// run without one) the architecture it built and the task it learnt, e.g. "new llama, 4 x 64,
// task associative_recall".
QString modelOf(const nlohmann::json& config) {
  const QString folder = configString(config, "model");
  if (!folder.isEmpty() || !config.is_object()) return folder;
  const auto arch = config.find("architecture");
  if (arch == config.end() || !arch->is_object()) return {};
  const auto number = [&](const char* key) {
    const auto it = arch->find(key);
    return it != arch->end() && it->is_number_integer() ? QString::number(it->get<int64_t>()) : QStringLiteral("?");
  };
  QString text = QObject::tr("new %1, %2 x %3").arg(configString(*arch, "model_type"), number("n_layer"), number("n_embd"));
  const auto task = config.find("task");
  if (task != config.end() && task->is_object()) {
    const QString kind = configString(*task, "kind");
    if (!kind.isEmpty()) text += QObject::tr(", task %1").arg(kind);
  }
  return text;
}

// A run's status as the table shows it: its last file's (interrupted when that says running but
// no writer holds it).
QString statusOf(const runs::RunReader& reader) {
  return QString::fromStdString(runs::shownStatus(reader));
}

// The last value of every scalar of a resumed run's files, joined at the resume steps (the
// first of them open as `first`).
void readChainedLastValues(const runs::RunReader& first, const std::vector<std::string>& files, RunSummary& s) {
  for (const auto& [name, series] : runs::chainedAllScalars(first, files)) {
    if (series.steps.empty()) continue;
    s.lastStep = std::max<qint64>(s.lastStep, series.steps.back());
    const QString shown = QString::fromStdString(name);
    s.lastValues[shown] = series.values.back();
    if (runBrowserMetrics().contains(shown)) s.finals[shown] = series.values.back();
  }
}

// One run: `chain` is its files in order (one for a run never resumed). The header columns come
// from the first file, the status from the last.
RunSummary summarize(const std::vector<std::string>& chain) {
  RunSummary s;
  s.path = QString::fromStdString(chain.front());
  for (const auto& file : chain) s.chain << QString::fromStdString(file);
  try {
    const auto reader = runs::RunReader::open(chain.front());
    const auto& header = reader.header();
    s.runId = QString::fromStdString(header.runId);
    s.kind = QString::fromStdString(header.kind);
    s.status = chain.size() == 1 ? statusOf(reader) : statusOf(runs::RunReader::open(chain.back()));
    s.started = QString::fromStdString(header.startTime);
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(header.configJson);
    } catch (const std::exception&) {
    }
    s.model = modelOf(config);
    s.featureMap = configString(config, "feature_map");
    if (chain.size() > 1) {
      readChainedLastValues(reader, chain, s);
      return s;
    }
    for (const auto& spec : header.layout.scalars) {  // a single file: its last rows only
      const int64_t rows = reader.scalarRows(spec.name);
      if (rows == 0) continue;
      const auto last = reader.scalars(spec.name, rows - 1);
      if (!last.steps.empty()) s.lastStep = std::max<qint64>(s.lastStep, last.steps.back());
      const QString name = QString::fromStdString(spec.name);
      if (last.values.empty()) continue;
      s.lastValues[name] = last.values.back();
      if (runBrowserMetrics().contains(name)) s.finals[name] = last.values.back();
    }
  } catch (const std::exception& e) {
    s.error = QString::fromStdString(e.what());
    s.status = QStringLiteral("unreadable");
  }
  return s;
}

}  // namespace

const QStringList& runBrowserMetrics() {
  static const QStringList metrics{QStringLiteral("val_loss"), QStringLiteral("kl_mean"), QStringLiteral("perplexity"),
                                   QStringLiteral("perplexity_converted"), QStringLiteral("accuracy")};
  return metrics;
}

std::vector<RunSummary> scanRuns(const QString& folder) {
  std::vector<std::pair<QDateTime, std::vector<std::string>>> found;  // last write, the run's files
  QDirIterator it(folder, {QStringLiteral("*.h5")}, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const std::string path = it.next().toStdString();
    const auto chain = runs::chainOf(path);
    if (chain.front() != path) continue;  // a continuation: listed with its run's first file
    QDateTime written;
    for (const auto& file : chain) written = std::max(written, QFileInfo(QString::fromStdString(file)).lastModified());
    found.emplace_back(written, chain);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<RunSummary> out;
  for (const auto& [time, chain] : found) out.push_back(summarize(chain));
  return out;
}

RunBrowser::RunBrowser(QWidget* parent) : QWidget(parent) {
  folder_ = new QLineEdit(QStringLiteral("runs"), this);
  auto* rescan = new QPushButton(tr("Rescan"), this);
  summary_ = new QLabel(this);
  table_ = makeTable();
  pool_ = new QThreadPool(this);
  pool_->setMaxThreadCount(1);
  overlayButton_ = new QPushButton(tr("Overlay"), this);
  overlayButton_->setToolTip(tr("Draw the selected runs' loss (or KL) curves on one plot"));
  overlayButton_->setEnabled(false);
  makeCsvButton();
  overlay_ = new RunOverlay(this);
  overlay_->setVisible(false);  // until the first overlay

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Runs under"), this));
  top->addWidget(folder_, 1);
  top->addWidget(rescan);
  top->addWidget(summary_);
  top->addWidget(overlayButton_);
  top->addWidget(csvButton_);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(overlay_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(split, 1);
  connect(table_, &QTableWidget::itemSelectionChanged, this, [this] {
    const bool any = !selectedPaths().isEmpty();
    overlayButton_->setEnabled(any);
    csvButton_->setEnabled(any);
  });
  connect(overlayButton_, &QPushButton::clicked, this, [this] { overlayRuns(selectedPaths()); });
  connect(rescan, &QPushButton::clicked, this, &RunBrowser::refresh);
  connect(folder_, &QLineEdit::returnPressed, this, &RunBrowser::refresh);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (auto* item = table_->item(row, kFile)) Q_EMIT runActivated(item->data(Qt::UserRole).toString());
  });
}

// The runs' table: a row per run file, sortable, several rows selectable.
QTableWidget* RunBrowser::makeTable() {
  auto* table = new QTableWidget(this);
  QStringList headers{tr("file"),  tr("kind"),        tr("status"), tr("started (UTC)"),
                      tr("model"), tr("feature map"), tr("steps")};
  headers << runBrowserMetrics();
  table->setColumnCount(int(headers.size()));
  table->setHorizontalHeaderLabels(headers);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSortingEnabled(true);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->horizontalHeader()->setStretchLastSection(true);
  table->verticalHeader()->setVisible(false);
  table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  return table;
}

// "Export CSV" and its menu of the two shapes, each asking for a file.
void RunBrowser::makeCsvButton() {
  csvButton_ = new QPushButton(tr("Export CSV"), this);
  csvButton_->setToolTip(tr("The selected runs as one CSV: their last values, or their whole traces"));
  auto* csvMenu = new QMenu(csvButton_);
  QAction* lastValues = csvMenu->addAction(tr("Last values: one row per run\u2026"));
  lastValues->setObjectName(QStringLiteral("csvLastValues"));
  lastValues->setToolTip(tr("run id, kind, status, model, feature map and the last value of every series"));
  QAction* traces = csvMenu->addAction(tr("Whole traces: one row per step\u2026"));
  traces->setObjectName(QStringLiteral("csvTraces"));
  traces->setToolTip(tr("step, then a column per run and series (\"run:loss\"), blank where a run logged nothing"));
  csvButton_->setMenu(csvMenu);
  csvButton_->setEnabled(false);
  connect(lastValues, &QAction::triggered, this, [this] { chooseCsvFile(CsvShape::LastValues); });
  connect(traces, &QAction::triggered, this, [this] { chooseCsvFile(CsvShape::Traces); });
}

RunBrowser::~RunBrowser() {
  scans_.drop();
  overlays_.drop();
  pool_->waitForDone();
}

void RunBrowser::setFolder(const QString& folder) {
  folder_->setText(folder);
  refresh();
}

QString RunBrowser::folder() const {
  return folder_->text();
}

int RunBrowser::rowCount() const {
  return table_->rowCount();
}

void RunBrowser::refresh() {
  const QString folder = folder_->text();
  summary_->setText(tr("scanning\u2026"));
  scans_.run(pool_, this, [folder] { return scanRuns(folder); }, [this](const std::vector<RunSummary>& runs) { show(runs); });
}

void RunBrowser::show(const std::vector<RunSummary>& runs) {
  const QStringList selected = selectedPaths();  // kept by path: a new run file shifts the rows
  runs_ = runs;
  table_->clearSelection();
  table_->setSortingEnabled(false);
  table_->setRowCount(int(runs.size()));
  for (int r = 0; r < int(runs.size()); ++r) {
    const auto& s = runs[size_t(r)];
    auto set = [&](int column, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      table_->setItem(r, column, item);
      return item;
    };
    QString name = shownName(s.path);
    if (s.chain.size() == 2) name += tr(" (+1 continuation)");
    if (s.chain.size() > 2) name += tr(" (+%1 continuations)").arg(s.chain.size() - 1);
    auto* file = set(kFile, name);
    file->setData(Qt::UserRole, s.path);
    file->setToolTip(s.error.isEmpty() ? s.chain.join(QLatin1Char('\n')) : s.error);
    set(kKind, s.kind);
    QStringList resumes;
    for (qsizetype i = 1; i < s.chain.size(); ++i)
      resumes << QString::number(runs::resumedAfter(s.chain[i].toStdString()));
    set(kStatus, s.status)
        ->setToolTip(!s.error.isEmpty()  ? s.error
                     : resumes.isEmpty() ? QString()
                                         : tr("resumed after step %1").arg(resumes.join(QStringLiteral(", "))));
    set(kStarted, s.started);
    set(kModel, s.model);
    set(kFeatureMap, s.featureMap);
    auto* steps = new QTableWidgetItem;
    steps->setData(Qt::DisplayRole, s.lastStep);
    table_->setItem(r, kSteps, steps);
    for (int m = 0; m < runBrowserMetrics().size(); ++m) {
      auto* item = new QTableWidgetItem;
      const auto it = s.finals.find(runBrowserMetrics()[m]);
      if (it != s.finals.end() && std::isfinite(it->second)) item->setData(Qt::DisplayRole, it->second);
      table_->setItem(r, kFirstMetric + m, item);
    }
  }
  table_->setSortingEnabled(true);
  reselect(selected);
  summary_->setText(runs.size() == 1 ? tr("1 run") : tr("%1 runs").arg(runs.size()));
  Q_EMIT scanned(int(runs.size()));
}

void RunBrowser::reselect(const QStringList& paths) {
  if (paths.isEmpty()) return;
  auto* selection = table_->selectionModel();
  for (int r = 0; r < table_->rowCount(); ++r) {
    const auto* item = table_->item(r, kFile);
    if (item != nullptr && paths.contains(item->data(Qt::UserRole).toString()))
      selection->select(table_->model()->index(r, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

QString RunBrowser::shownName(const QString& path) const {
  // Relative to the folder scanned when inside it.
  const QString root = QFileInfo(folder_->text()).absoluteFilePath();
  QString shown = QFileInfo(path).absoluteFilePath();
  if (shown.startsWith(root + QLatin1Char('/'))) shown = shown.mid(root.size() + 1);
  return shown;
}

QStringList RunBrowser::selectedPaths() const {
  std::vector<int> rows;
  for (const QModelIndex& index : table_->selectionModel()->selectedRows(kFile)) rows.push_back(index.row());
  std::sort(rows.begin(), rows.end());
  QStringList paths;
  for (const int row : rows)
    if (const auto* item = table_->item(row, kFile)) paths << item->data(Qt::UserRole).toString();
  return paths;
}

std::vector<RunSummary> RunBrowser::summariesOf(const QStringList& paths) const {
  std::vector<RunSummary> out;
  for (const QString& path : paths)
    for (const auto& s : runs_)
      if (s.path == path) out.push_back(s);
  return out;
}

void RunBrowser::overlayRuns(const QStringList& paths) {
  std::vector<std::pair<QString, QString>> files;  // path, legend label
  for (const QString& path : paths) files.emplace_back(path, shownName(path));
  overlay_->setVisible(true);
  overlays_.run(
      pool_, this,
      [files] {
        std::vector<RunCurves> curves;
        for (const auto& [path, label] : files) curves.push_back(readRunCurves(path, label));
        return curves;
      },
      [this](std::vector<RunCurves> curves) {
        const int n = int(curves.size());
        overlay_->setRuns(std::move(curves));
        Q_EMIT overlayReady(n);
      });
}

QString RunBrowser::exportCsv(const QString& file, const QStringList& paths, CsvShape shape) const {
  if (shape == CsvShape::LastValues) return writeRunsCsv(file, summariesOf(paths));
  std::vector<RunTraces> traces;
  QStringList unreadable;
  for (const QString& path : paths) {
    traces.push_back(readRunTraces(path, shownName(path)));
    if (!traces.back().error.isEmpty()) unreadable << traces.back().error;
  }
  if (!unreadable.isEmpty()) return unreadable.join(QLatin1Char('\n'));  // nothing written: no silent gaps
  return writeTracesCsv(file, traces);
}

void RunBrowser::chooseCsvFile(CsvShape shape) {
  const QStringList paths = selectedPaths();
  if (paths.isEmpty()) return;
  const QString file = QFileDialog::getSaveFileName(
      this, tr("Export runs as CSV"), shape == CsvShape::LastValues ? QStringLiteral("runs.csv") : QStringLiteral("traces.csv"),
      tr("CSV files (*.csv)"));
  if (file.isEmpty()) return;
  const QString error = exportCsv(file, paths, shape);
  if (!error.isEmpty()) {
    showErrorDialog(this, tr("Export CSV"), error);
  } else {
    summary_->setText(tr("%n run(s) written to %1", nullptr, int(paths.size())).arg(file));
  }
}

}  // namespace hh::gui

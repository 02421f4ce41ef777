#include "app/gui/run_browser.h"

#include <QDateTime>
#include <QDirIterator>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "engine/runs/run_reader.h"

namespace hh::gui {
namespace {

enum Column { kFile, kKind, kStatus, kStarted, kModel, kFeatureMap, kSteps, kFirstMetric };

QString configString(const nlohmann::json& config, const char* key) {
  if (config.is_object() && config.contains(key) && config.at(key).is_string())
    return QString::fromStdString(config.at(key).get<std::string>());
  return {};
}

RunSummary summarize(const QString& path) {
  RunSummary s;
  s.path = path;
  try {
    const auto reader = runs::RunReader::open(path.toStdString());
    const auto& header = reader.header();
    s.kind = QString::fromStdString(header.kind);
    s.status = reader.interrupted() ? QStringLiteral("interrupted") : QString::fromLatin1(runs::statusName(reader.status()));
    s.started = QString::fromStdString(header.startTime);
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(header.configJson);
    } catch (const std::exception&) {
    }
    s.model = configString(config, "model");
    s.featureMap = configString(config, "feature_map");
    for (const auto& spec : header.layout.scalars) {
      const int64_t rows = reader.scalarRows(spec.name);
      if (rows == 0) continue;
      const auto last = reader.scalars(spec.name, rows - 1);
      if (!last.steps.empty()) s.lastStep = std::max<qint64>(s.lastStep, last.steps.back());
      const QString name = QString::fromStdString(spec.name);
      if (runBrowserMetrics().contains(name) && !last.values.empty()) s.finals[name] = last.values.back();
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
  std::vector<std::pair<QDateTime, QString>> files;
  QDirIterator it(folder, {QStringLiteral("*.h5")}, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    files.emplace_back(QFileInfo(path).lastModified(), path);
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<RunSummary> out;
  for (const auto& [time, path] : files) out.push_back(summarize(path));
  return out;
}

RunBrowser::RunBrowser(QWidget* parent) : QWidget(parent) {
  folder_ = new QLineEdit(QStringLiteral("runs"), this);
  auto* rescan = new QPushButton(tr("Rescan"), this);
  summary_ = new QLabel(this);
  table_ = new QTableWidget(this);
  QStringList headers{tr("file"), tr("kind"), tr("status"), tr("started (UTC)"), tr("model"), tr("feature map"), tr("steps")};
  headers << runBrowserMetrics();
  table_->setColumnCount(int(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSortingEnabled(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setVisible(false);
  pool_ = new QThreadPool(this);
  pool_->setMaxThreadCount(1);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Runs under"), this));
  top->addWidget(folder_, 1);
  top->addWidget(rescan);
  top->addWidget(summary_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(table_, 1);
  connect(rescan, &QPushButton::clicked, this, &RunBrowser::refresh);
  connect(folder_, &QLineEdit::returnPressed, this, &RunBrowser::refresh);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (auto* item = table_->item(row, kFile)) Q_EMIT runActivated(item->data(Qt::UserRole).toString());
  });
}

RunBrowser::~RunBrowser() {
  ++generation_;
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
  const int generation = ++generation_;
  const QString folder = folder_->text();
  summary_->setText(tr("scanning\u2026"));
  pool_->start([this, folder, generation] {
    auto runs = scanRuns(folder);
    QMetaObject::invokeMethod(this, [this, runs = std::move(runs), generation] { show(runs, generation); },
                              Qt::QueuedConnection);
  });
}

void RunBrowser::show(const std::vector<RunSummary>& runs, int generation) {
  if (generation != generation_) return;
  table_->setSortingEnabled(false);
  table_->setRowCount(int(runs.size()));
  const QString root = QFileInfo(folder_->text()).absoluteFilePath();
  for (int r = 0; r < int(runs.size()); ++r) {
    const auto& s = runs[size_t(r)];
    auto set = [&](int column, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      table_->setItem(r, column, item);
      return item;
    };
    QString shown = QFileInfo(s.path).absoluteFilePath();
    if (shown.startsWith(root + QLatin1Char('/'))) shown = shown.mid(root.size() + 1);
    auto* file = set(kFile, shown);
    file->setData(Qt::UserRole, s.path);
    file->setToolTip(s.error.isEmpty() ? s.path : s.error);
    set(kKind, s.kind);
    set(kStatus, s.status)->setToolTip(s.error);
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
  summary_->setText(tr("%n run file(s)", nullptr, int(runs.size())));
  Q_EMIT scanned(int(runs.size()));
}

}  // namespace hh::gui

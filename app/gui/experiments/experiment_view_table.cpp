// ExperimentView's table (see experiment_view.h): a row per run, the declared variants' mean +-
// sd rows and the rows against the baseline above them, and the metric columns a user chose.
#include <QBrush>
#include <QHeaderView>
#include <QMenu>
#include <QTableWidget>

#include <algorithm>
#include <cmath>

#include "app/gui/experiments/experiment_view.h"

namespace hh::gui {

void ExperimentView::fillTable() {
  std::set<QString> keys;
  for (const auto& v : variants_)
    for (const auto& [k, value] : v.metrics) keys.insert(k);
  QStringList headers{tr("variant"), tr("status"), tr("seconds")};
  for (const auto& k : keys) headers << k;
  table_->clear();
  table_->setColumnCount(headers.size());
  table_->setRowCount(int(variants_.size() + groups_.size()) + liveRowCount() + baselineRowCount());
  table_->setHorizontalHeaderLabels(headers);
  // The declared variants' rows come first (the headline), then their differences from the
  // baseline, then the runs, then the variants still running or waiting.
  const int first = int(groups_.size()) + baselineRowCount();
  for (int r = first; r < first + int(variants_.size()); ++r) {
    const auto& v = variants_[size_t(r - first)];
    auto* name = new QTableWidgetItem(v.name);
    name->setToolTip(tr("Double-click to open this run on the dashboard"));
    table_->setItem(r, 0, name);
    table_->setItem(r, 1, new QTableWidgetItem(v.status));
    if (const QString live = liveStateOf(v.name); !live.isEmpty()) {  // running again: its last record greyed
      table_->item(r, 1)->setText(tr("%1 (last: %2)").arg(live, v.status));
      table_->item(r, 1)->setForeground(palette().brush(QPalette::Disabled, QPalette::Text));
    }
    table_->setItem(r, 2, new QTableWidgetItem(QString::number(v.seconds, 'f', 1)));
    int c = kFixedColumns;
    for (const auto& k : keys) {
      const auto it = v.metrics.find(k);
      table_->setItem(r, c++, new QTableWidgetItem(it == v.metrics.end() ? QString() : QString::number(it->second, 'g', 5)));
    }
  }
  const QBrush grey = palette().brush(QPalette::Disabled, QPalette::Text);
  int r = first + int(variants_.size());
  for (const auto& [name, state] : liveRows_) {
    if (listed(name)) continue;  // shown in its run's row above
    for (int c = 0; c < 2; ++c) {
      auto* item = new QTableWidgetItem(c == 0 ? name : state);
      item->setForeground(grey);
      table_->setItem(r, c, item);
    }
    ++r;
  }
  fillGroupRows(keys);
  fillBaselineRows(keys);
  table_->resizeColumnsToContents();
  for (int c = kFixedColumns; c < table_->columnCount(); ++c)  // what the user hid stays hidden
    table_->setColumnHidden(c, hiddenColumns_.contains(headers[c]));
}

void ExperimentView::setLiveRows(const std::vector<std::pair<QString, QString>>& rows) {
  if (rows == liveRows_) return;
  liveRows_ = rows;
  fillTable();
}

int ExperimentView::liveRowCount() const {
  return int(std::count_if(liveRows_.begin(), liveRows_.end(), [this](const auto& row) { return !listed(row.first); }));
}

bool ExperimentView::listed(const QString& name) const {
  return std::any_of(variants_.begin(), variants_.end(), [&name](const auto& v) { return v.name == name; });
}

QString ExperimentView::liveStateOf(const QString& name) const {
  for (const auto& [live, state] : liveRows_)
    if (live == name) return state;
  return {};
}

QStringList ExperimentView::variantNames() const {
  QStringList names;
  for (const auto& v : variants_) names << v.name;
  return names;
}

int ExperimentView::baselineRowCount() const {
  return int(std::count_if(groups_.begin(), groups_.end(), [](const Group& g) { return !g.baseline.isEmpty(); }));
}

// Below the groups, one italic row per variant compared with the baseline: its value minus the
// baseline's, repeat by repeat.
void ExperimentView::fillBaselineRows(const std::set<QString>& keys) {
  QFont italic = table_->font();
  italic.setItalic(true);
  int r = int(groups_.size());
  for (const auto& g : groups_) {
    if (g.baseline.isEmpty()) continue;
    std::vector<QTableWidgetItem*> items{new QTableWidgetItem(tr("%1 \u2212 %2").arg(g.name, g.baseline)),
                                         new QTableWidgetItem(tr("paired by repeat")), new QTableWidgetItem};
    for (const auto& k : keys) {
      const auto it = g.againstBaseline.find(k);
      items.push_back(new QTableWidgetItem(it == g.againstBaseline.end() ? QString() : it->second));
    }
    for (int c = 0; c < int(items.size()); ++c) {
      items[size_t(c)]->setFont(italic);
      items[size_t(c)]->setToolTip(
          tr("%1 minus %2 in each repeat both completed: the differences' mean \u00b1 sample sd, the two-sided "
             "paired t-test's p, and in how many repeats %1 came out lower / higher")
              .arg(g.name, g.baseline));
      table_->setItem(r, c, items[size_t(c)]);
    }
    ++r;
  }
}

// Above the runs, one bold row per declared variant: "mean +- sd" over its completed repeats.
void ExperimentView::fillGroupRows(const std::set<QString>& keys) {
  QFont bold = table_->font();
  bold.setBold(true);
  for (size_t i = 0; i < groups_.size(); ++i) {
    const auto& g = groups_[i];
    const int r = int(i);
    std::vector<QTableWidgetItem*> items{
        new QTableWidgetItem(tr("%1: mean \u00b1 sd").arg(g.name)),
        new QTableWidgetItem(tr("%1 of %2 completed").arg(g.completed).arg(g.runs.size())), new QTableWidgetItem};
    for (const auto& k : keys) {
      const auto it = g.meanSd.find(k);
      QString text;
      if (it != g.meanSd.end())
        text = std::isnan(it->second.second)
                   ? QString::number(it->second.first, 'g', 5)
                   : QStringLiteral("%1 \u00b1 %2")
                         .arg(QString::number(it->second.first, 'g', 5), QString::number(it->second.second, 'g', 2));
      items.push_back(new QTableWidgetItem(text));
    }
    for (int c = 0; c < int(items.size()); ++c) {
      items[size_t(c)]->setFont(bold);
      items[size_t(c)]->setToolTip(tr("Over the repeats of %1 that completed (sample standard deviation)").arg(g.name));
      table_->setItem(r, c, items[size_t(c)]);
    }
  }
}

// A checkable entry per metric column (unchecked: hidden), and one that shows them all.
void ExperimentView::fillColumnMenu(QMenu* menu) {
  for (int c = kFixedColumns; c < table_->columnCount(); ++c) {
    const QString name = table_->horizontalHeaderItem(c)->text();
    QAction* a = menu->addAction(name);
    a->setCheckable(true);
    a->setChecked(!hiddenColumns_.contains(name));
    connect(a, &QAction::toggled, this, [this, name](bool shown) { setMetricColumnShown(name, shown); });
  }
  menu->addSeparator();
  menu->addAction(tr("Show every column"), this, [this] {
    for (const auto& name : QStringList(hiddenColumns_.begin(), hiddenColumns_.end())) setMetricColumnShown(name, true);
  });
}

void ExperimentView::setMetricColumnShown(const QString& name, bool shown) {
  if (shown) hiddenColumns_.remove(name);
  else hiddenColumns_.insert(name);
  for (int c = kFixedColumns; c < table_->columnCount(); ++c)
    if (table_->horizontalHeaderItem(c)->text() == name) table_->setColumnHidden(c, !shown);
}

bool ExperimentView::showOnlyMetricColumns(const QStringList& names) {
  QStringList columns;
  for (int c = kFixedColumns; c < table_->columnCount(); ++c) columns << table_->horizontalHeaderItem(c)->text();
  for (const auto& name : names)
    if (!columns.contains(name)) return false;
  for (const auto& column : columns) setMetricColumnShown(column, names.contains(column));
  return true;
}

QStringList ExperimentView::hiddenMetricColumns() const {
  QStringList names(hiddenColumns_.begin(), hiddenColumns_.end());
  names.sort();
  return names;
}

}  // namespace hh::gui

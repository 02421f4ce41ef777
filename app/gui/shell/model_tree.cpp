// The "Model" dock's tree (see model_tree.h).
#include "app/gui/shell/model_tree.h"

#include <QRegularExpression>

#include <QHeaderView>

#include "engine/models/preflight.h"

namespace hh::gui {
namespace {

enum Role { LayerRole = Qt::UserRole + 1, HeadRole };

QTreeWidgetItem* item(QTreeWidgetItem* parent, const QString& name, const QString& value = {}) {
  auto* it = new QTreeWidgetItem(parent, {name, value});
  it->setToolTip(0, name);
  it->setToolTip(1, value);
  return it;
}

}  // namespace


ModelTree::ModelTree(QWidget* parent) : QTreeWidget(parent) {
  setColumnCount(2);
  setHeaderLabels({tr("Model"), tr("")});
  header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  setUniformRowHeights(true);
  connect(this, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* it, int) {
    const QVariant layer = it->data(0, LayerRole), head = it->data(0, HeadRole);
    if (layer.isValid() && head.isValid()) Q_EMIT headActivated(layer.toInt(), head.toInt());
  });
  showEmpty();
}

void ModelTree::showEmpty() {
  // Short lines: the dock is narrow, and a long one would end behind a scroll bar.
  clear();
  setColumnHidden(1, true);  // no values: the hints get the dock's whole width
  auto* top = new QTreeWidgetItem(this, {tr("No model open")});
  item(top, tr("File > Open model folder"));
  item(top, tr("or Ctrl+Shift+O"));
  top->setExpanded(true);
}

void ModelTree::setSummary(const ModelSummary& s) {
  clear();
  setColumnHidden(1, false);
  auto* root = new QTreeWidgetItem(this, {s.modelType, s.folder});
  root->setToolTip(1, s.folder);
  item(root, tr("parameters"), QString::fromStdString(models::humanCount(s.parameters)));
  item(root, tr("hidden size"), QString::number(s.hiddenSize));
  item(root, tr("heads"), s.kvHeads != s.heads ? tr("%1 query, %2 key/value, D = %3").arg(s.heads).arg(s.kvHeads).arg(s.headDim)
                                                 : tr("%1 \u00d7 D = %2").arg(s.heads).arg(s.headDim));
  item(root, tr("positions"), QString::number(s.maxPositions));
  item(root, tr("attention"), s.causal ? tr("causal") : tr("bidirectional"));
  auto* layers = item(root, tr("layers"), QString::number(s.layers));
  for (int l = 0; l < s.layers; ++l) {
    const QString kind = l < s.layerAttention.size() ? s.layerAttention[l] : QStringLiteral("softmax");
    auto* layer = item(layers, tr("layer %1").arg(l), kind);
    for (int h = 0; h < s.heads; ++h) {
      auto* head = item(layer, tr("head %1").arg(h), tr("open in the inspector"));
      head->setData(0, LayerRole, l);
      head->setData(0, HeadRole, h);
    }
  }
  auto* pre = item(this->invisibleRootItem(), tr("pre-flight"),
                   s.blockers.isEmpty() ? (s.warnings.isEmpty() ? tr("ready") : tr("ready, %1 warnings").arg(s.warnings.size()))
                                        : tr("%1 blockers").arg(s.blockers.size()));
  for (const QString& w : s.warnings) item(pre, tr("warning"), w);
  // The report's lines: "pre-flight: FOLDER", "  key   value" (columns of spaces), "ready to
  // convert", "  blocker: ..." / "  note: ..." (its warnings are the rows above).
  static const QRegularExpression labelled(QStringLiteral("^\\s*([\\w-]+):\\s+(.*)$"));
  static const QRegularExpression columns(QStringLiteral("^\\s*(\\S.*?)\\s{2,}(\\S.*)$"));
  for (const QString& line : s.preflightText.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
    if (line.trimmed().startsWith(QLatin1String("warning:"))) continue;
    auto match = labelled.match(line);
    if (!match.hasMatch()) match = columns.match(line);
    if (match.hasMatch())
      item(pre, match.captured(1), match.captured(2).trimmed());
    else item(pre, line.trimmed());
  }
  root->setExpanded(true);
  layers->setExpanded(true);
  pre->setExpanded(!s.warnings.isEmpty());
}

void ModelTree::showError(const QString& message, const QStringList& blockers) {
  clear();
  setColumnHidden(1, false);
  auto* top = new QTreeWidgetItem(this, {message});
  top->setToolTip(0, message);
  for (const QString& b : blockers) item(top, tr("blocker"), b);
  top->setExpanded(true);
}

}  // namespace hh::gui

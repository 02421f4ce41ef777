// RankResultsPanel: the ranking's heatmap, the layers hardest first and the plan (see
// rank_results.h).
#include "app/gui/rank/rank_results.h"

#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "engine/config/attention_types.h"
#include "widgets/heatmap_view.h"
#include "widgets/qcp.h"

namespace hh::gui {
namespace {

const QColor kKeptBackground(0xff, 0xec, 0xc7);  // amber, light: the rows the plan keeps
const QColor kKeptOutline(0xd6, 0x27, 0x28);      // red: stands out on viridis' dark and bright ends alike
const char* const kStar = "\u2605";
const char* const kDecorationLayer = "rankDecorations";  // the heatmap's QCP layer of the outlines and values
constexpr int kMaxCellTexts = 32 * 32;  // more cells get no printed values (the readout still has them)

enum RankColumn { kRankColumn, kLayerColumn, kErrorColumn, kKlColumn, kPlanColumn, kColumns };

QString cellNumber(double v) {
  return std::isfinite(v) ? QString::number(v, 'f', 4) : QStringLiteral("\u2013");
}

// The spec of a layer in the plan, or "" when keep-as is not a valid spec.
QString validSpec(const QString& spec) {
  try {
    hh::attn::parseLayerAttention(spec.trimmed().toStdString());
    return spec.trimmed();
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

jobs::ConvertConfig conversionConfigForPlan(const jobs::RankConfig& ranked, const std::vector<std::string>& plan) {
  jobs::ConvertConfig c;
  c.modelDir = ranked.modelDir;
  c.runDir = "runs/convert";
  c.data = ranked.data;
  c.seed = ranked.seed;
  c.plan = plan;
  return c;
}

QStringList RankResultsPanel::keepAsChoices() {
  return {QStringLiteral("softmax"), QStringLiteral("hedgehog_window(64)"), QStringLiteral("hedgehog_window(16)")};
}

RankResultsPanel::RankResultsPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  summary_ = new QLabel(tr("No ranking yet: start one above, or open a rank.json."));
  summary_->setObjectName(QStringLiteral("rankSummary"));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(buildMapSide());
  split->addWidget(buildPlanSide());
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);
  clear();
}

QWidget* RankResultsPanel::buildMapSide() {
  auto* side = new QWidget;
  auto* layout = new QVBoxLayout(side);
  layout->setContentsMargins(0, 0, 4, 0);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Show")));
  metric_ = new QComboBox;
  metric_->setObjectName(QStringLiteral("rankMetric"));
  metric_->addItems({tr("Relative output error"), tr("KL(softmax \u2016 linear)")});
  metric_->setToolTip(tr("Output error: sum |y_linear - y_softmax|\u00b2 / sum |y_softmax|\u00b2 of each head's attention "
                         "output on held-out rows (what ranks the layers). KL: of the attention weights, in nats."));
  row->addWidget(metric_);
  row->addStretch(1);
  layout->addLayout(row);
  heatmap_ = new widgets::HeatmapView;
  heatmap_->setAxisTitles(tr("head"), tr("layer"));
  heatmap_->setReadoutNames(tr("layer"), tr("head"));
  heatmap_->setEmptyText(tr("Each head's error after the trial\nconversion, once a ranking is done"));
  heatmap_->plot()->addLayer(QString::fromLatin1(kDecorationLayer), heatmap_->plot()->layer(QStringLiteral("main")),
                             QCustomPlot::limAbove);
  connect(heatmap_->plot(), &QCustomPlot::beforeReplot, this, &RankResultsPanel::fitCellTexts);
  layout->addWidget(heatmap_, 1);
  connect(metric_, &QComboBox::currentIndexChanged, this, &RankResultsPanel::showMetric);
  return side;
}

QWidget* RankResultsPanel::buildPlanSide() {
  auto* side = new QWidget;
  auto* layout = new QVBoxLayout(side);
  layout->setContentsMargins(4, 0, 0, 0);
  auto* title = new QLabel(tr("Layers, hardest first"));
  title->setObjectName(QStringLiteral("panelTitle"));
  layout->addWidget(title);
  list_ = new QTreeWidget;
  list_->setObjectName(QStringLiteral("rankLayers"));
  list_->setRootIsDecorated(false);
  list_->setHeaderLabels({tr("#"), tr("Layer"), tr("Output error"), tr("KL"), tr("Plan")});
  list_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  list_->header()->setStretchLastSection(true);
  layout->addWidget(list_, 1);

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::FieldsStayAtSizeHint);
  budget_ = new QSpinBox;
  budget_->setObjectName(QStringLiteral("rankBudget"));
  budget_->setMinimumWidth(80);
  budget_->setToolTip(tr("How many of the hardest layers the plan keeps (not converted to the ranked attention)"));
  keepAs_ = new QComboBox;
  keepAs_->setObjectName(QStringLiteral("rankKeepAs"));
  keepAs_->setEditable(true);
  keepAs_->addItems(keepAsChoices());
  keepAs_->setMinimumContentsLength(20);
  keepAs_->setToolTip(tr("What the kept layers run: softmax, or a sliding-window hybrid (any layer spec)"));
  attention_ = new QLabel;
  form->addRow(tr("Budget k (layers kept)"), budget_);
  form->addRow(tr("Kept layers run"), keepAs_);
  form->addRow(tr("Other layers run"), attention_);
  layout->addLayout(form);
  planLabel_ = new QLabel;
  planLabel_->setObjectName(QStringLiteral("rankPlan"));
  planLabel_->setWordWrap(true);
  planLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(planLabel_);
  convert_ = new QPushButton(tr("Convert with this plan\u2026"));
  convert_->setObjectName(QStringLiteral("rankConvert"));
  convert_->setToolTip(tr("Open the New conversion form with this model and plan"));
  layout->addWidget(convert_, 0, Qt::AlignRight);
  connect(budget_, &QSpinBox::valueChanged, this, &RankResultsPanel::updatePlan);
  connect(keepAs_, &QComboBox::currentTextChanged, this, &RankResultsPanel::updatePlan);
  connect(convert_, &QPushButton::clicked, this, &RankResultsPanel::convertRequested);
  return side;
}

void RankResultsPanel::setRanking(const jobs::RankResult& result, const jobs::RankConfig& config) {
  result_ = result;
  config_ = config;
  plan_.clear();  // until updatePlan below: no row is kept
  hasRanking_ = true;
  const int layers = int(result.layerScore.size());
  const QString model = QFileInfo(QString::fromStdString(config.modelDir)).fileName();
  // The rows actually measured (fewer than probe_rows when the data holds fewer); a rank.json
  // from before measured_rows was written says only what was asked.
  const int64_t measuredRows = result.measuredRows > 0 ? result.measuredRows : config.probeRows;
  summary_->setText(tr("<b>%1</b>: every layer tried with <b>%2</b> for %3 distillation steps, measured on %4 "
                       "held-out rows; %5 layers x %6 heads.")
                        .arg(model.toHtmlEscaped(), QString::fromStdString(config.attention).toHtmlEscaped(),
                             QString::number(config.steps), QString::number(measuredRows), QString::number(layers),
                             QString::number(result.outputError.heads)));
  summary_->setToolTip(QString::fromStdString(config.modelDir));
  attention_->setText(QString::fromStdString(config.attention));
  const QSignalBlocker blockBudget(budget_), blockKeep(keepAs_);
  budget_->setRange(0, layers);
  budget_->setValue(int(std::clamp<int64_t>(config.keep, 0, layers)));
  const QString keepAs = QString::fromStdString(config.keepAs);
  if (keepAs_->findText(keepAs) < 0) keepAs_->addItem(keepAs);
  keepAs_->setCurrentText(keepAs);
  budget_->setEnabled(true);
  keepAs_->setEnabled(true);
  fillList();
  showMetric();
  updatePlan();
}

void RankResultsPanel::clear() {
  hasRanking_ = false;
  result_ = {};
  plan_.clear();
  heatmap_->clear();
  list_->clear();
  budget_->setRange(0, 0);
  budget_->setEnabled(false);
  keepAs_->setEnabled(false);
  attention_->clear();
  planLabel_->setText(tr("The plan appears here once there is a ranking."));
  convert_->setEnabled(false);
  decorateMap();
}

void RankResultsPanel::setMetric(Metric metric) { metric_->setCurrentIndex(metric == Metric::Kl ? 1 : 0); }

RankResultsPanel::Metric RankResultsPanel::metric() const {
  return metric_->currentIndex() == 1 ? Metric::Kl : Metric::OutputError;
}

void RankResultsPanel::setBudget(int k) { budget_->setValue(k); }
int RankResultsPanel::budget() const { return budget_->value(); }
void RankResultsPanel::setKeepAs(const QString& spec) { keepAs_->setCurrentText(spec); }
QString RankResultsPanel::keepAs() const { return keepAs_->currentText().trimmed(); }

jobs::ConvertConfig RankResultsPanel::conversionConfig() const { return conversionConfigForPlan(config_, plan_); }

QStringList RankResultsPanel::rowLabels() const {
  QStringList labels;
  for (int l = 0; l < result_.outputError.layers; ++l)
    labels << (kept(l) ? QStringLiteral("L%1 %2").arg(l).arg(QString::fromUtf8(kStar)) : QStringLiteral("L%1").arg(l));
  return labels;
}

bool RankResultsPanel::kept(int layer) const {
  if (plan_.empty()) return false;
  const auto first = result_.hardestFirst.begin();
  const auto end = first + std::ptrdiff_t(std::min(size_t(std::max(budget(), 0)), result_.hardestFirst.size()));
  return std::find(first, end, int64_t(layer)) != end;
}

void RankResultsPanel::showMetric() {
  if (!hasRanking_) return;
  const bool kl = metric() == Metric::Kl;
  const jobs::HeadTable& table = kl ? result_.kl : result_.outputError;
  heatmap_->setTokenLabels(rowLabels(), {});
  heatmap_->setMatrix(table.layers, table.heads, std::vector<float>(table.values.begin(), table.values.end()));
  heatmap_->setValueLabel(kl ? tr("KL (nats)") : tr("relative output error"));
  heatmap_->setTitle(kl ? tr("KL(softmax \u2016 linear) per head") : tr("Relative output error per head"));
  decorateMap();
}

void RankResultsPanel::fillList() {
  list_->clear();
  for (size_t i = 0; i < result_.hardestFirst.size(); ++i) {
    const auto layer = size_t(result_.hardestFirst[i]);
    auto* item = new QTreeWidgetItem(list_);
    item->setText(kRankColumn, QString::number(i + 1));
    item->setText(kLayerColumn, QStringLiteral("L%1").arg(layer));
    item->setText(kErrorColumn, cellNumber(layer < result_.layerScore.size() ? result_.layerScore[layer] : NAN));
    item->setText(kKlColumn, cellNumber(layer < result_.layerKl.size() ? result_.layerKl[layer] : NAN));
    item->setData(kLayerColumn, Qt::UserRole, qlonglong(layer));
    for (int c : {kRankColumn, kErrorColumn, kKlColumn}) item->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
  }
}

void RankResultsPanel::updatePlan() {
  if (!hasRanking_) return;
  const QString keepAs = validSpec(keepAs_->currentText());
  plan_ = keepAs.isEmpty() ? std::vector<std::string>{}
                           : jobs::proposePlan(result_.hardestFirst, budget(), keepAs.toStdString(), config_.attention);
  const bool allSoftmax = !plan_.empty() && std::all_of(plan_.begin(), plan_.end(),
                                                        [](const std::string& spec) { return spec == "softmax"; });
  convert_->setEnabled(!plan_.empty() && !allSoftmax);
  if (plan_.empty()) {
    planLabel_->setText(tr("<span style='color:#b3261e'>\u201c%1\u201d is not a layer attention (e.g. softmax, "
                           "hedgehog_window(64)).</span>").arg(keepAs_->currentText().toHtmlEscaped()));
  } else if (allSoftmax) {
    planLabel_->setText(
        tr("<span style='color:#b3261e'>Every layer kept as softmax: nothing to convert. Keep fewer "
           "layers, or keep them as a window hybrid.</span>"));
  } else {
    QStringList perLayer, specs;
    for (size_t l = 0; l < plan_.size(); ++l) {
      const QString spec = QString::fromStdString(plan_[l]).toHtmlEscaped();
      perLayer << (kept(int(l)) ? QStringLiteral("<b>L%1 %2</b>").arg(l).arg(spec) : QStringLiteral("L%1 %2").arg(l).arg(spec));
      specs << spec;
    }
    planLabel_->setText(tr("<b>Plan</b> (%1 of %2 layers kept): %3<br><code>--plan %4</code>")
                            .arg(std::min<int>(budget(), int(plan_.size())))
                            .arg(plan_.size())
                            .arg(perLayer.join(QStringLiteral(" \u00b7 ")), specs.join(QLatin1Char(','))));
  }
  markKeptLayers();
  heatmap_->setTokenLabels(rowLabels(), {});
  decorateMap();
  Q_EMIT planChanged();
}

void RankResultsPanel::markKeptLayers() {
  QFont bold = list_->font();
  bold.setBold(true);
  for (int i = 0; i < list_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* item = list_->topLevelItem(i);
    const int layer = item->data(kLayerColumn, Qt::UserRole).toInt();
    const bool keep = kept(layer);
    item->setText(kPlanColumn, size_t(layer) < plan_.size() ? QString::fromStdString(plan_[size_t(layer)]) : QString());
    for (int c = 0; c < kColumns; ++c) {
      item->setFont(c, keep ? bold : list_->font());
      item->setBackground(c, keep ? QBrush(kKeptBackground) : QBrush());
    }
  }
}

void RankResultsPanel::decorateMap() {
  QCustomPlot* plot = heatmap_->plot();
  QCPLayer* layer = plot->layer(QString::fromLatin1(kDecorationLayer));
  for (QCPLayerable* item : layer->children())
    if (auto* any = qobject_cast<QCPAbstractItem*>(item)) plot->removeItem(any);
  cellTexts_.clear();
  if (hasRanking_) {
    annotateCells(layer);
    outlineKeptRows(layer);
  }
  plot->replot(QCustomPlot::rpQueuedReplot);
}

void RankResultsPanel::annotateCells(QCPLayer* layer) {
  const jobs::HeadTable& table = metric() == Metric::Kl ? result_.kl : result_.outputError;
  if (table.layers * table.heads > kMaxCellTexts) return;
  const auto [lo, hi] = heatmap_->valueRange();
  QFont font = heatmap_->font();
  font.setPointSizeF(std::max(6.0, font.pointSizeF() * 0.8));
  for (int l = 0; l < table.layers; ++l)
    for (int h = 0; h < table.heads; ++h) {
      const double v = table.values[size_t(l * table.heads + h)];
      auto* text = new QCPItemText(heatmap_->plot());
      text->setLayer(layer);
      text->setClipToAxisRect(true);
      text->position->setCoords(h, l);
      text->setFont(font);
      text->setText(std::isfinite(v) ? QString::number(v, 'f', 3) : QStringLiteral("\u2013"));
      // Dark text on viridis' bright (high) end, light text on its dark end.
      const double t = hi > lo ? (v - lo) / (hi - lo) : 0.0;
      text->setColor(t > 0.6 ? QColor(0x20, 0x22, 0x25) : QColor(0xf4, 0xf5, 0xf7));
      cellTexts_.push_back(text);
    }
}

void RankResultsPanel::fitCellTexts() {
  if (cellTexts_.empty()) return;
  const QCustomPlot* plot = heatmap_->plot();
  const double cellW = std::abs(plot->xAxis->coordToPixel(1) - plot->xAxis->coordToPixel(0));
  const double cellH = std::abs(plot->yAxis->coordToPixel(1) - plot->yAxis->coordToPixel(0));
  const QFontMetrics fm(cellTexts_.front()->font());
  const bool fits = cellW >= fm.horizontalAdvance(QStringLiteral("0.000")) + 6 && cellH >= fm.height() + 2;
  for (QCPItemText* text : cellTexts_) text->setVisible(fits);
}

void RankResultsPanel::outlineKeptRows(QCPLayer* layer) {
  const int heads = result_.outputError.heads;
  constexpr double kInset = 0.03;  // inside the axis rect, so that no edge is clipped
  for (int l = 0; l < result_.outputError.layers; ++l) {
    if (!kept(l)) continue;
    auto* rect = new QCPItemRect(heatmap_->plot());
    rect->setLayer(layer);
    rect->setClipToAxisRect(true);
    rect->topLeft->setCoords(-0.5 + kInset, l - 0.5 + kInset);
    rect->bottomRight->setCoords(heads - 0.5 - kInset, l + 0.5 - kInset);
    rect->setPen(QPen(kKeptOutline, 3));
    rect->setBrush(Qt::NoBrush);
  }
}

}  // namespace hh::gui

// Heatmaps, monotonicity curves and metrics of one head's softmax against several feature maps
// (see comparison_view.h).
#include "app/gui/comparison/comparison_view.h"

#include <QComboBox>
#include <QFrame>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "widgets/color_bar.h"
#include "widgets/curve_plot.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {
namespace {

const QColor kSoftmaxColor(0x20, 0x20, 0x20);  // softmax: near black, the reference
// Okabe-Ito colours for the feature maps, in order.
const QColor kMapColors[] = {QColor(0xd5, 0x5e, 0x00), QColor(0x00, 0x72, 0xb2), QColor(0x00, 0x9e, 0x73),
                             QColor(0xcc, 0x79, 0xa7), QColor(0xe6, 0x9f, 0x00), QColor(0x56, 0xb4, 0xe9),
                             QColor(0xf0, 0xe4, 0x42), QColor(0x99, 0x99, 0x99)};
QColor mapColor(int i) { return kMapColors[size_t(i) % (sizeof(kMapColors) / sizeof(kMapColors[0]))]; }

// A white rounded panel (style.qss: QFrame#panel) around one widget.
QFrame* titledPanel(QWidget* content, const QString& title = {}, QWidget* corner = nullptr) {
  auto* frame = new QFrame;
  frame->setObjectName(QStringLiteral("panel"));
  auto* layout = new QVBoxLayout(frame);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->setSpacing(4);
  if (!title.isEmpty() || corner) {
    auto* head = new QHBoxLayout;
    auto* label = new QLabel(title);
    label->setObjectName(QStringLiteral("panelTitle"));
    head->addWidget(label, 1);
    if (corner) head->addWidget(corner);
    layout->addLayout(head);
  }
  layout->addWidget(content, 1);
  return frame;
}

QString num(double v, int precision = 3) {
  return std::isnan(v) ? QStringLiteral("n/a") : QString::number(v, 'f', precision);
}

}  // namespace

ComparisonView::ComparisonView(QWidget* parent) : QWidget(parent), result_(std::make_shared<const ComparisonResult>()) {
  auto* maps = buildMapsRow();
  buildDifference();
  curves_ = new hh::widgets::CurvePlot;
  curves_->setAxisLabels(QStringLiteral("score q\u00b7k / \u221ad  (bin centre)"), QStringLiteral("attention weight"));
  curves_->setLegendVisible(true);
  auto* metrics = buildMetricsPanel();

  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(8, 8, 8, 8);
  grid->setSpacing(8);
  // The maps take the whole first row (up to six side by side); below them the difference map,
  // the monotonicity curves and the metrics.
  grid->addWidget(titledPanel(maps, tr("Softmax and linear attention weights (one colour scale, clipped at p99)")), 0,
                  0, 1, 3);
  grid->addWidget(titledPanel(difference_, tr("Difference to softmax of"), focusBox_), 1, 0);
  grid->addWidget(titledPanel(curves_, tr("Monotonicity: mean weight per score bin \u00b1 std")), 1, 1);
  grid->addWidget(titledPanel(metrics, tr("Head metrics")), 1, 2);
  grid->setRowStretch(0, 3);
  grid->setRowStretch(1, 2);
  for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);
}

// The maps' grid with one colour scale beside it: inside one map the scale would take that map's width.
QWidget* ComparisonView::buildMapsRow() {
  mapsBox_ = new QWidget;
  auto* mapsRow = new QHBoxLayout(mapsBox_);
  mapsRow->setContentsMargins(0, 0, 0, 0);
  mapsGrid_ = new QGridLayout;
  mapsGrid_->setContentsMargins(0, 0, 0, 0);
  mapsGrid_->setSpacing(6);
  mapsRow->addLayout(mapsGrid_, 1);
  colorBar_ = new hh::widgets::ColorBar;
  colorBar_->setLabel(QStringLiteral("weight"));
  mapsRow->addWidget(colorBar_);
  return mapsBox_;
}

// The difference map of the feature map chosen in focusBox_, and the hover read-out it drives.
void ComparisonView::buildDifference() {
  difference_ = new hh::widgets::HeatmapView;
  difference_->setColorMode(hh::widgets::HeatmapView::ColorMode::Diverging);
  difference_->setValueLabel(QStringLiteral("linear \u2212 softmax (clipped at p99)"));
  difference_->setMinimumSize(160, 150);
  focusBox_ = new QComboBox;
  focusBox_->setToolTip(tr("Feature map whose difference to softmax is shown"));
  focusBox_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  connect(focusBox_, &QComboBox::currentIndexChanged, this, [this](int i) { setFocusedMap(i); });
  hover_ = new QLabel;
  hover_->setObjectName(QStringLiteral("metrics"));
  hover_->setWordWrap(true);
  connect(difference_, &hh::widgets::HeatmapView::cellHovered, this, [this](int r, int c, double) { onHover(r, c); });
  connect(difference_, &hh::widgets::HeatmapView::hoverLeft, this, [this] {
    hover_->clear();
    Q_EMIT hoverText(QString());
  });
}

// Where the inputs came from, the per-map table, what its columns mean, and the hover read-out.
QWidget* ComparisonView::buildMetricsPanel() {
  table_ = new QTableWidget(0, 5);
  table_->setHorizontalHeaderLabels({tr("attention"), tr("F"), tr("KL(softmax \u2016 map)"), tr("entropy H"),
                                     tr("Spearman \u03c1")});
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  source_ = new QLabel;
  source_->setWordWrap(true);
  source_->setObjectName(QStringLiteral("metrics"));
  auto* legend = new QLabel(
      tr("<span style='color:#5f6368'>H: mean row entropy (nats). \u03c1: mean Spearman correlation of each row's "
         "weights with its scores q\u00b7k/\u221ad (1 = monotonic, like softmax). KL averaged over rows. Wheel "
         "zooms a map, drag pans, double-click resets.</span>"));
  legend->setWordWrap(true);
  auto* metricsBox = new QWidget;
  auto* metricsLayout = new QVBoxLayout(metricsBox);
  metricsLayout->setContentsMargins(0, 0, 0, 0);
  metricsLayout->addWidget(source_);
  metricsLayout->addWidget(table_, 1);
  metricsLayout->addWidget(legend);
  metricsLayout->addWidget(hover_);
  return metricsBox;
}

hh::widgets::SharedValues ComparisonView::shared(const std::vector<float>& matrix) const {
  return hh::widgets::SharedValues(result_, &matrix);  // keeps the whole result alive
}

hh::widgets::HeatmapView* ComparisonView::map(int index) const {
  return index >= 0 && index < visibleMaps_ ? maps_[index] : nullptr;
}

void ComparisonView::ensureMapViews(int count) {
  while (maps_.size() < count) {
    auto* view = new hh::widgets::HeatmapView;
    view->setValueLabel(QStringLiteral("weight"));
    view->setMinimumSize(160, 150);  // several side by side must fit a laptop screen
    view->setAxisTitles(QString(), QString());
    view->setColorScaleVisible(false);  // the shared scale is colorBar_
    connect(view, &hh::widgets::HeatmapView::cellHovered, this, [this](int r, int c, double) { onHover(r, c); });
    connect(view, &hh::widgets::HeatmapView::hoverLeft, this, [this] {
      hover_->clear();
      Q_EMIT hoverText(QString());
    });
    maps_ << view;
  }
}

void ComparisonView::layoutMaps() {
  // Up to 6 side by side; more wrap into two rows.
  const int columns = visibleMaps_ <= 6 ? std::max(visibleMaps_, 1) : (visibleMaps_ + 1) / 2;
  for (auto* view : maps_) mapsGrid_->removeWidget(view);
  for (int i = 0; i < maps_.size(); ++i) {
    maps_[i]->setVisible(i < visibleMaps_);
    if (i < visibleMaps_) mapsGrid_->addWidget(maps_[i], i / columns, i % columns);
    else
      maps_[i]->clear();  // a hidden view would keep an earlier result's matrices alive
  }
}

void ComparisonView::setResult(ComparisonResult result) {
  result_ = std::make_shared<const ComparisonResult>(std::move(result));
  updateMaps();
  updateCurves();
  updateFocusChoices();
  source_->setText(result_->source);
  updateDifference();
  updateTable();
}

// One heatmap per map after softmax's, all on one scale, so a flatter map looks flatter. The
// scale tops out at the 99th percentile (computed with the result): a few saturated cells (the
// first causal row is always 1) would otherwise leave everything else in the darkest colours.
// The heatmaps share the result's matrices: nothing T x T is copied.
void ComparisonView::updateMaps() {
  const ComparisonResult& result = *result_;
  const int t = result.length;
  const int n = int(result.maps.size());
  ensureMapViews(n + 1);
  visibleMaps_ = n + 1;
  layoutMaps();
  const double hi = result.weightsTop;
  for (int i = 0; i <= n; ++i) {
    auto* view = maps_[i];
    view->setSharedMatrix(t, t, shared(i == 0 ? result.softmax : result.maps[size_t(i - 1)].weights));
    view->setSharedScores(t, t, shared(result.scores));
    view->setTokenLabels(result.tokens, result.tokens);
    if (hi > 0.0) view->setValueRange(0.0, hi);
    else view->setAutoValueRange();
    if (i == 0) {
      const auto [lo, top] = view->valueRange();
      colorBar_->setRange(lo, top);
      view->setTitle(tr("softmax \u00b7 H %1").arg(num(result.entropySoftmax, 2)));
    } else {
      const auto& m = result.maps[size_t(i - 1)];
      view->setTitle(tr("%1 \u00b7 KL %2").arg(m.name, num(m.kl, 3)));  // H and rho: the table
    }
  }
}

// Softmax's monotonicity curve with its spread, and each map's.
void ComparisonView::updateCurves() {
  curves_->clear();
  curves_->addSeries(QStringLiteral("softmax"), result_->softmaxCurve.x, result_->softmaxCurve.mean,
                     result_->softmaxCurve.spread, kSoftmaxColor);
  for (int i = 0; i < int(result_->maps.size()); ++i) {
    const auto& m = result_->maps[size_t(i)];
    curves_->addSeries(m.name, m.curve.x, m.curve.mean, {}, mapColor(i));
  }
}

// The focus list: the map in focus is kept; a model's own trained map, when it first appears,
// takes the focus.
void ComparisonView::updateFocusChoices() {
  const QSignalBlocker block(focusBox_);
  const QString previous = focusBox_->currentText();
  focusBox_->clear();
  for (const auto& m : result_->maps) focusBox_->addItem(m.name);
  const bool hadTrained = previous == QLatin1String("trained") || focusBox_->property("hadTrained").toBool();
  const int trained = focusBox_->findText(QStringLiteral("trained"));
  focusBox_->setProperty("hadTrained", trained >= 0);
  const int keep = focusBox_->findText(previous);
  focus_ = (trained >= 0 && !hadTrained) ? trained : keep >= 0 ? keep : 0;
  focusBox_->setCurrentIndex(focus_);
}

void ComparisonView::setFocusedMap(int index) {
  if (index < 0 || index >= int(result_->maps.size())) return;
  focus_ = index;
  if (focusBox_->currentIndex() != index) {
    const QSignalBlocker block(focusBox_);
    focusBox_->setCurrentIndex(index);
  }
  updateDifference();
}

void ComparisonView::updateDifference() {
  const ComparisonResult& result = *result_;
  const int t = result.length;
  if (result.maps.empty()) {
    difference_->clear();
    return;
  }
  const auto& m = result.maps[size_t(focus_)];
  difference_->setSharedMatrix(t, t, shared(m.difference));
  difference_->setSharedScores(t, t, shared(result.scores));
  difference_->setTokenLabels(result.tokens, result.tokens);
  const double diff = m.differenceTop;
  if (diff > 0.0) difference_->setValueRange(-diff, diff);
  else difference_->setAutoValueRange();
  difference_->setTitle(tr("%1 \u2212 softmax \u00b7 KL %2").arg(m.name, num(m.kl, 3)));
}

void ComparisonView::updateTable() {
  const int n = int(result_->maps.size());
  table_->setRowCount(n + 1);
  auto put = [this](int row, int col, const QString& text, const QColor& color = QColor()) {
    auto* item = new QTableWidgetItem(text);
    item->setTextAlignment(col == 0 ? (Qt::AlignLeft | Qt::AlignVCenter) : (Qt::AlignRight | Qt::AlignVCenter));
    if (color.isValid()) item->setForeground(color);
    table_->setItem(row, col, item);
  };
  put(0, 0, QStringLiteral("softmax"), kSoftmaxColor);
  put(0, 1, QStringLiteral("\u2013"));
  put(0, 2, QStringLiteral("0"));
  put(0, 3, num(result_->entropySoftmax));
  put(0, 4, num(result_->spearmanSoftmax));
  for (int i = 0; i < n; ++i) {
    const auto& m = result_->maps[size_t(i)];
    put(i + 1, 0, m.name, mapColor(i));
    put(i + 1, 1, QString::number(m.featureDim));
    put(i + 1, 2, num(m.kl, 4));
    put(i + 1, 3, num(m.entropy));
    put(i + 1, 4, num(m.spearman));
  }
  table_->resizeRowsToContents();
}

void ComparisonView::showError(const QString& message) {
  setResult(ComparisonResult{});  // no map, curve, row or hover value of the previous head stays
  source_->setText(QStringLiteral("<span style='color:#b2182b'><b>Could not compute:</b> %1</span>")
                       .arg(message.toHtmlEscaped()));
}

void ComparisonView::onHover(int row, int col) {
  const int t = result_->length;
  if (row < 0 || col < 0 || row >= t || col >= t) return;
  const std::size_t i = std::size_t(row) * std::size_t(t) + std::size_t(col);
  auto at = [i](const std::vector<float>& v) { return i < v.size() ? double(v[i]) : std::nan(""); };
  auto label = [this](int index) {
    return index < result_->tokens.size() ? QStringLiteral("%1 \u201c%2\u201d").arg(index).arg(result_->tokens[index])
                                          : QString::number(index);
  };
  QString text = tr("query %1, key %2: q\u00b7k/\u221ad %3, softmax %4")
                     .arg(label(row), label(col), num(at(result_->scores)), num(at(result_->softmax), 4));
  for (const auto& m : result_->maps) text += QStringLiteral(", %1 %2").arg(m.name, num(at(m.weights), 4));
  hover_->setText(QStringLiteral("<span style='color:#5f6368'>%1</span>").arg(text.toHtmlEscaped()));
  Q_EMIT hoverText(text);
}

}  // namespace hh::gui

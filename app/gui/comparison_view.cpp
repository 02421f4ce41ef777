// Heatmaps, monotonicity curves and metrics of one softmax-vs-linear comparison
// (see comparison_view.h).
#include "app/gui/comparison_view.h"

#include <QFrame>
#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "widgets/curve_plot.h"
#include "widgets/heatmap_view.h"
#include "widgets/matrix_downsample.h"

namespace hh::gui {
namespace {

const QColor kSoftmaxColor(0x00, 0x72, 0xb2);  // Okabe-Ito blue
const QColor kLinearColor(0xd5, 0x5e, 0x00);   // Okabe-Ito vermillion

// A white rounded panel (style.qss: QFrame#panel) around one widget.
QFrame* panel(QWidget* content, const QString& title = {}) {
  auto* frame = new QFrame;
  frame->setObjectName(QStringLiteral("panel"));
  auto* layout = new QVBoxLayout(frame);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->setSpacing(4);
  if (!title.isEmpty()) {
    auto* label = new QLabel(title);
    label->setObjectName(QStringLiteral("panelTitle"));
    layout->addWidget(label);
  }
  layout->addWidget(content, 1);
  return frame;
}

// The kTopPercentile-th percentile of the finite values (or their magnitudes) of some matrices.
constexpr double kTopPercentile = 0.99;
double upperPercentile(std::initializer_list<const std::vector<float>*> matrices, bool magnitude) {
  std::vector<float> finite;
  for (const auto* m : matrices)
    for (float x : *m)
      if (std::isfinite(x)) finite.push_back(magnitude ? std::fabs(x) : x);
  if (finite.empty()) return 0.0;
  const auto nth = finite.begin() + std::ptrdiff_t(kTopPercentile * double(finite.size() - 1));
  std::nth_element(finite.begin(), nth, finite.end());
  return double(*nth);
}

QString num(double v, int precision = 3) {
  return std::isnan(v) ? QStringLiteral("n/a") : QString::number(v, 'f', precision);
}

}  // namespace

ComparisonView::ComparisonView(QWidget* parent) : QWidget(parent) {
  softmax_ = new hh::widgets::HeatmapView;
  linear_ = new hh::widgets::HeatmapView;
  difference_ = new hh::widgets::HeatmapView;
  difference_->setColorMode(hh::widgets::HeatmapView::ColorMode::Diverging);
  difference_->setValueLabel(QStringLiteral("linear \u2212 softmax (clipped at p99)"));
  for (auto* map : {softmax_, linear_}) map->setValueLabel(QStringLiteral("weight (clipped at p99)"));
  curves_ = new hh::widgets::CurvePlot;
  curves_->setAxisLabels(QStringLiteral("score q\u00b7k / \u221ad  (bin centre)"), QStringLiteral("attention weight"));

  metrics_ = new QLabel;
  metrics_->setObjectName(QStringLiteral("metrics"));
  metrics_->setTextFormat(Qt::RichText);
  metrics_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  metrics_->setWordWrap(true);
  hover_ = new QLabel;
  hover_->setObjectName(QStringLiteral("metrics"));
  hover_->setTextFormat(Qt::RichText);
  hover_->setWordWrap(true);
  auto* metricsBox = new QWidget;
  auto* metricsLayout = new QVBoxLayout(metricsBox);
  metricsLayout->setContentsMargins(0, 0, 0, 0);
  auto* legend = new QLabel(
      tr("<p style='color:#5f6368'>H: mean entropy of the rows (nats). \u03c1: mean Spearman rank correlation "
         "of each row's weights with its scores q\u00b7k/\u221ad (1 = monotonic, like softmax). KL is averaged "
         "over the rows. Wheel zooms a map, drag pans, double-click resets; hover a cell to read the same "
         "(query, key) pair in all three maps.</p>"));
  legend->setWordWrap(true);
  legend->setTextFormat(Qt::RichText);
  metricsLayout->addWidget(metrics_);
  metricsLayout->addWidget(legend);
  metricsLayout->addStretch(1);
  metricsLayout->addWidget(hover_);

  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(8, 8, 8, 8);
  grid->setSpacing(8);
  grid->addWidget(panel(softmax_), 0, 0);
  grid->addWidget(panel(linear_), 0, 1);
  grid->addWidget(panel(difference_), 0, 2);
  grid->addWidget(panel(curves_, tr("Monotonicity: mean weight per score bin \u00b1 std")), 1, 0, 1, 2);
  grid->addWidget(panel(metricsBox, tr("Head metrics")), 1, 2);
  grid->setRowStretch(0, 3);
  grid->setRowStretch(1, 2);
  for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);

  for (auto* map : {softmax_, linear_, difference_}) {
    connect(map, &hh::widgets::HeatmapView::cellHovered, this, [this](int row, int col, double) { onHover(row, col); });
    connect(map, &hh::widgets::HeatmapView::hoverLeft, this, [this] {
      hover_->clear();
      Q_EMIT hoverText(QString());
    });
  }
}

void ComparisonView::setResult(const ComparisonResult& result) {
  result_ = result;
  const int t = result.length;
  const QString name = result.settings.featureMap;
  softmax_->setMatrix(t, t, result.softmax);
  linear_->setMatrix(t, t, result.linear);
  difference_->setMatrix(t, t, result.difference);
  for (auto* map : {softmax_, linear_, difference_}) map->setScores(t, t, result.scores);

  // Softmax and linear weights on one scale, so a flatter linear map looks flatter. The scale
  // tops out at the 99th percentile of both maps' weights: a few saturated cells (the first
  // causal row is always 1) would otherwise leave everything else in the darkest colours.
  const double hi = upperPercentile({&result.softmax, &result.linear}, false);
  const double diff = upperPercentile({&result.difference}, true);
  if (hi > 0.0) {
    softmax_->setValueRange(0.0, hi);
    linear_->setValueRange(0.0, hi);
  } else {
    softmax_->setAutoValueRange();
    linear_->setAutoValueRange();
  }
  if (diff > 0.0) {
    difference_->setValueRange(-diff, diff);
  } else {
    difference_->setAutoValueRange();
  }
  softmax_->setTitle(tr("softmax  \u00b7  H = %1  \u00b7  \u03c1 = %2")
                         .arg(num(result.entropySoftmax, 2), num(result.spearmanSoftmax, 2)));
  linear_->setTitle(
      tr("%1  \u00b7  H = %2  \u00b7  \u03c1 = %3").arg(name, num(result.entropyLinear, 2), num(result.spearmanLinear, 2)));
  difference_->setTitle(tr("%1 \u2212 softmax  \u00b7  KL = %2").arg(name, num(result.kl, 3)));

  curves_->clear();
  curves_->addSeries(QStringLiteral("softmax"), result.softmaxCurve.x, result.softmaxCurve.mean,
                     result.softmaxCurve.spread, kSoftmaxColor);
  curves_->addSeries(name, result.linearCurve.x, result.linearCurve.mean, result.linearCurve.spread, kLinearColor);
  updateMetrics();
}

void ComparisonView::showError(const QString& message) {
  metrics_->setText(QStringLiteral("<p style='color:#b2182b'><b>Could not compute:</b> %1</p>")
                        .arg(message.toHtmlEscaped()));
}

void ComparisonView::updateMetrics() {
  const ComparisonResult& r = result_;
  const ComparisonSettings& s = r.settings;
  auto row = [](const QString& k, const QString& v) {
    return QStringLiteral("<tr><td style='color:#5f6368; padding-right:12px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  QString html = QStringLiteral("<table cellspacing='2'>");
  html += row(tr("feature map"), QStringLiteral("<b>%1</b> (F = %2)").arg(s.featureMap).arg(r.featureDim));
  html += row(tr("head"), tr("T = %1, D = %2, %3, seed %4")
                               .arg(s.length)
                               .arg(s.headDim)
                               .arg(s.causal ? tr("causal") : tr("bidirectional"))
                               .arg(s.seed));
  html += row(tr("KL(softmax \u2016 linear)"), QStringLiteral("<b>%1</b> nats").arg(num(r.kl, 4)));
  html += row(tr("entropy"), tr("softmax %1, linear %2 nats").arg(num(r.entropySoftmax), num(r.entropyLinear)));
  html += row(tr("Spearman \u03c1"), tr("softmax %1, linear %2").arg(num(r.spearmanSoftmax), num(r.spearmanLinear)));
  html += row(tr("computed in"), QStringLiteral("%1 ms").arg(r.milliseconds, 0, 'f', 1));
  html += QStringLiteral("</table>");
  metrics_->setText(html);
}

void ComparisonView::onHover(int row, int col) {
  const int t = result_.length;
  if (row < 0 || col < 0 || row >= t || col >= t) return;
  const std::size_t i = std::size_t(row) * std::size_t(t) + std::size_t(col);
  auto at = [i](const std::vector<float>& v) { return i < v.size() ? double(v[i]) : std::nan(""); };
  const QString text = tr("query %1, key %2: score %3, softmax %4, %5 %6, difference %7")
                           .arg(row)
                           .arg(col)
                           .arg(num(at(result_.scores)), num(at(result_.softmax), 4), result_.settings.featureMap,
                                num(at(result_.linear), 4), num(at(result_.difference), 4));
  hover_->setText(QStringLiteral("<span style='color:#5f6368'>%1</span>").arg(text.toHtmlEscaped()));
  Q_EMIT hoverText(text);
}

}  // namespace hh::gui

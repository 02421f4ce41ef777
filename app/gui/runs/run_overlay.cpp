// Several runs' curves on one plot (see run_overlay.h).
#include "app/gui/runs/run_overlay.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "engine/runs/run_reader.h"
#include "widgets/curve_plot.h"

namespace hh::gui {

const QStringList& overlayScalars() {
  static const QStringList names{QStringLiteral("loss"), QStringLiteral("val_loss"), QStringLiteral("kl_mean")};
  return names;
}

RunCurves readRunCurves(const QString& path, const QString& label) {
  RunCurves out;
  out.path = path;
  out.label = label;
  try {
    const auto reader = runs::RunReader::open(path.toStdString());
    for (const auto& spec : reader.header().layout.scalars) {
      const QString name = QString::fromStdString(spec.name);
      if (!overlayScalars().contains(name)) continue;
      const auto series = reader.scalars(spec.name);
      if (series.steps.empty()) continue;
      auto& curve = out.curves[name];
      curve.steps = QVector<double>(series.steps.begin(), series.steps.end());
      curve.values = QVector<double>(series.values.begin(), series.values.end());
    }
  } catch (const std::exception& e) {
    out.error = QString::fromStdString(e.what());
  }
  return out;
}

RunOverlay::RunOverlay(QWidget* parent) : QWidget(parent) {
  metric_ = new QComboBox(this);
  metric_->setObjectName(QStringLiteral("overlayMetric"));
  metric_->addItem(tr("loss and val_loss"));
  metric_->addItem(tr("kl_mean"));
  connect(metric_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] { redraw(); });
  note_ = new QLabel(this);
  plot_ = new widgets::CurvePlot(this);
  plot_->setAxisLabels(tr("step"), tr("value"));
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Overlay of the selected runs:"), this));
  row->addWidget(metric_);
  row->addWidget(note_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(row);
  layout->addWidget(plot_, 1);
}

void RunOverlay::setRuns(std::vector<RunCurves> runs) {
  runs_ = std::move(runs);
  redraw();
}

void RunOverlay::setMetric(Metric metric) {
  metric_->setCurrentIndex(metric == Metric::Loss ? 0 : 1);
}

RunOverlay::Metric RunOverlay::metric() const {
  return metric_->currentIndex() == 0 ? Metric::Loss : Metric::KlMean;
}

int RunOverlay::seriesOf(int run, const QString& scalar) const {
  const auto it = series_.find({run, scalar});
  return it == series_.end() ? -1 : it->second;
}

void RunOverlay::redraw() {
  plot_->clear();
  series_.clear();
  const bool loss = metric() == Metric::Loss;
  plot_->setTitle(loss ? tr("Loss (lines) and held-out loss (points)") : tr("Mean KL(softmax || linear)"));
  plot_->setAxisLabels(tr("step"), loss ? tr("loss") : tr("KL"));
  QStringList unreadable, without;
  for (int r = 0; r < int(runs_.size()); ++r) {
    const auto& run = runs_[size_t(r)];
    if (!run.error.isEmpty()) {
      unreadable << run.label;
      continue;
    }
    const QColor color = widgets::seriesPaletteColor(r);  // one colour per run, whatever it draws
    auto draw = [&](const QString& scalar, const QString& name, widgets::CurvePlot::SeriesStyle style) {
      const auto it = run.curves.find(scalar);
      if (it == run.curves.end()) return false;
      const int index = plot_->addSeries(name, it->second.steps, it->second.values, {}, color);
      plot_->setSeriesStyle(index, style, style == widgets::CurvePlot::SeriesStyle::Points ? 1.5 : 1.8);
      series_[{r, scalar}] = index;
      return true;
    };
    bool any = false;
    if (loss) {
      any |= draw(QStringLiteral("loss"), run.label, widgets::CurvePlot::SeriesStyle::Line);
      any |= draw(QStringLiteral("val_loss"), tr("%1 (held-out)").arg(run.label), widgets::CurvePlot::SeriesStyle::Points);
    } else {
      any = draw(QStringLiteral("kl_mean"), run.label, widgets::CurvePlot::SeriesStyle::LineAndPoints);
    }
    if (!any) without << run.label;
  }
  QStringList notes;
  if (!without.isEmpty()) notes << tr("not in these runs: %1").arg(without.join(QStringLiteral(", ")));
  if (!unreadable.isEmpty()) notes << tr("unreadable: %1").arg(unreadable.join(QStringLiteral(", ")));
  note_->setText(notes.join(QStringLiteral("; ")));
  plot_->rescaleAxes();
}

}  // namespace hh::gui

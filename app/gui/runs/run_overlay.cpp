// Several runs' curves on one plot (see run_overlay.h).
#include "app/gui/runs/run_overlay.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QVBoxLayout>

#include <QFileInfo>

#include <algorithm>
#include <cmath>

#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"
#include "widgets/curve_plot.h"

namespace hh::gui {

const QStringList& overlayScalars() {
  static const QStringList names{QStringLiteral("loss"), QStringLiteral("val_loss"), QStringLiteral("val_kl"),
                                 QStringLiteral("kl_mean")};
  return names;
}

RunCurves readRunCurves(const QString& path, const QString& label) {
  RunCurves out;
  out.path = path;
  out.label = label;
  try {
    const auto reader = runs::RunReader::open(path.toStdString());
    out.kind = QString::fromStdString(reader.header().kind);
    // A resumed run's files joined at the resume steps: the steps a killed run logged past its
    // checkpoint were redone by the continuation, and are drawn once, from it.
    const auto all = runs::chainedAllScalars(reader, runs::chainFrom(path.toStdString()));
    for (const QString& name : overlayScalars()) {
      const auto found = all.find(name.toStdString());
      if (found == all.end() || found->second.steps.empty()) continue;
      const auto& series = found->second;
      auto& curve = out.curves[name];
      for (size_t r = 0; r < series.steps.size(); ++r) {
        curve.steps.push_back(double(series.steps[r]));
        curve.values.push_back(series.values[r]);
      }
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
  relative_ = new QCheckBox(tr("relative to each run's first loss"), this);
  relative_->setObjectName(QStringLiteral("overlayRelative"));
  relative_->setToolTip(tr("Divide each run's loss and held-out loss by its first loss, so runs of different kinds "
                           "(a distillation near 55, a finetuning near 6) share one axis"));
  connect(relative_, &QCheckBox::toggled, this, [this] { redraw(); });
  note_ = new QLabel(this);
  plot_ = new widgets::CurvePlot(this);
  plot_->setAxisLabels(tr("step"), tr("value"));
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Overlay of the selected runs:"), this));
  row->addWidget(metric_);
  row->addWidget(relative_);
  row->addWidget(note_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(row);
  layout->addWidget(plot_, 1);
}

namespace {

QStringList kindsOf(const std::vector<RunCurves>& runs) {
  QStringList kinds;
  for (const auto& run : runs)
    if (run.error.isEmpty() && !kinds.contains(run.kind)) kinds << run.kind;
  return kinds;
}

// The first finite non-zero value of a curve (1 when there is none: the curve is drawn as is).
double firstScale(const RunCurves::Curve& curve) {
  for (const double v : curve.values)
    if (std::isfinite(v) && v != 0) return std::abs(v);
  return 1.0;
}

}  // namespace

void RunOverlay::setRuns(std::vector<RunCurves> runs) {
  runs_ = std::move(runs);
  const QSignalBlocker block(relative_);  // one redraw
  relative_->setChecked(kindsOf(runs_).size() > 1);
  redraw();
}

void RunOverlay::setRelative(bool relative) { relative_->setChecked(relative); }

bool RunOverlay::relative() const { return relative_->isChecked(); }

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
  const bool relative = loss && relative_->isChecked();
  relative_->setEnabled(loss);
  plot_->setTitle(loss ? tr("Loss (lines) and held-out loss (points)") : tr("Mean KL(softmax || linear)"));
  plot_->setAxisLabels(tr("step"), loss ? (relative ? tr("loss / the run's first loss") : tr("loss")) : tr("KL"));
  QStringList unreadable, without;
  for (int r = 0; r < int(runs_.size()); ++r) {
    const auto& run = runs_[size_t(r)];
    if (!run.error.isEmpty()) {
      unreadable << run.label;
      continue;
    }
    const QColor color = widgets::seriesPaletteColor(r);  // one colour per run, whatever it draws
    const auto first = run.curves.find(QStringLiteral("loss"));
    const double scale = relative && first != run.curves.end() ? firstScale(first->second) : 1.0;
    auto draw = [&](const QString& scalar, const QString& name, widgets::CurvePlot::SeriesStyle style) {
      const auto it = run.curves.find(scalar);
      if (it == run.curves.end()) return false;
      QVector<double> values = it->second.values;
      for (double& v : values) v /= scale;
      const int index = plot_->addSeries(name, it->second.steps, values, {}, color);
      plot_->setSeriesStyle(index, style, style == widgets::CurvePlot::SeriesStyle::Points ? 1.5 : 1.8);
      series_[{r, scalar}] = index;
      return true;
    };
    bool any = false;
    if (loss) {
      any |= draw(QStringLiteral("loss"), run.label, widgets::CurvePlot::SeriesStyle::Line);
      // A finetuning on teacher_kl has its loss's own quantity held out (val_kl); val_loss is the
      // next-token loss there, another number.
      const auto kl = run.curves.find(QStringLiteral("val_kl"));
      const bool heldOutKl = kl != run.curves.end() && !kl->second.values.isEmpty();
      any |= draw(heldOutKl ? QStringLiteral("val_kl") : QStringLiteral("val_loss"), tr("%1 (held-out)").arg(run.label),
                  widgets::CurvePlot::SeriesStyle::Points);
    } else {
      any = draw(QStringLiteral("kl_mean"), run.label, widgets::CurvePlot::SeriesStyle::LineAndPoints);
    }
    if (!any) without << run.label;
  }
  QStringList notes;
  const QStringList kinds = kindsOf(runs_);
  if (loss && kinds.size() > 1)
    notes << (relative ? tr("runs of different kinds (%1): each divided by its first loss").arg(kinds.join(QStringLiteral(", ")))
                       : tr("runs of different kinds (%1) on one scale").arg(kinds.join(QStringLiteral(", "))));
  if (!without.isEmpty()) notes << tr("not in these runs: %1").arg(without.join(QStringLiteral(", ")));
  if (!unreadable.isEmpty()) notes << tr("unreadable: %1").arg(unreadable.join(QStringLiteral(", ")));
  note_->setText(notes.join(QStringLiteral("; ")));
  plot_->rescaleAxes();
}

}  // namespace hh::gui

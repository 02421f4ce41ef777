// DashboardView's widgets and how they are laid out: the header (title, status, progress, pause,
// snapshot slider), the loss and learning-rate curves beside the head grid, the probe maps beside
// the monotonicity curves and the log (see dashboard_view.h).
#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>

#include "app/gui/conversion/dashboard_view.h"
#include "widgets/curve_plot.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {

void DashboardView::createWidgets() {
  title_ = new QLabel(tr("No run"), this);
  title_->setObjectName(QStringLiteral("dashboardTitle"));
  status_ = new QLabel(this);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setTextVisible(true);

  loss_ = new widgets::CurvePlot(this);
  loss_->setTitle(tr("Loss"));
  loss_->setAxisLabels(tr("step"), tr("loss"));
  lr_ = new widgets::CurvePlot(this);
  lr_->setTitle(tr("Learning rate"));
  lr_->setAxisLabels(tr("step"), tr("lr"));
  lr_->setLegendVisible(false);
  smoothing_ = new QSlider(Qt::Horizontal, this);
  smoothing_->setRange(0, 99);
  smoothing_->setValue(int(smoothingWeight_ * 100));
  smoothing_->setToolTip(tr("Exponential moving average of the loss (0 = raw)"));
  connect(smoothing_, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });

  tableChoice_ = new QComboBox(this);
  addTableChoices();
  connect(tableChoice_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] { refreshGrid(); });
  grid_ = new widgets::HeadGrid(this);
  connect(grid_, &widgets::HeadGrid::headClicked, this, &DashboardView::showPair);

  softmaxMap_ = new widgets::HeatmapView(this);
  softmaxMap_->setTitle(tr("softmax"));
  softmaxMap_->setValueLabel(tr("weight"));
  linearMap_ = new widgets::HeatmapView(this);
  linearMap_->setTitle(tr("linear"));
  linearMap_->setValueLabel(tr("weight"));
  mapsTitle_ = new QLabel(tr("Attention on the probe text"), this);
  mono_ = new widgets::CurvePlot(this);
  mono_->setTitle(tr("Monotonicity on the probe text"));
  mono_->setAxisLabels(QStringLiteral("q\u00b7k / \u221ad  (bin centre)"), tr("mean weight"));
  mono_->setMinimumHeight(200);
  log_ = new QPlainTextEdit(this);
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);
  pause_ = new QPushButton(tr("Pause"), this);
  pause_->setObjectName(QStringLiteral("dashboardPause"));
  pause_->setToolTip(tr("Pause the job at its next step, or resume it (Run menu, Ctrl+Shift+P)"));
  connect(pause_, &QPushButton::clicked, this,
          [this] { paused_ ? Q_EMIT resumeRequested() : Q_EMIT pauseRequested(); });
  stepSlider_ = new QSlider(Qt::Horizontal, this);
  stepSlider_->setObjectName(QStringLiteral("dashboardStepSlider"));
  stepSlider_->setToolTip(
      tr("Show the head grid and the probe maps at an earlier snapshot; the right end follows the latest"));
  stepSlider_->setPageStep(1);
  connect(stepSlider_, &QSlider::valueChanged, this, &DashboardView::onStepSlider);
  stepLabel_ = new QLabel(this);
}

void DashboardView::arrangeWidgets() {
  auto* header = new QGridLayout;
  header->addWidget(title_, 0, 0, 1, 3);
  header->addWidget(status_, 1, 0);
  header->addWidget(progress_, 1, 1);
  header->addWidget(pause_, 1, 2);
  header->addWidget(new QLabel(tr("snapshot"), this), 2, 0, Qt::AlignRight);
  header->addWidget(stepSlider_, 2, 1);
  header->addWidget(stepLabel_, 2, 2);
  header->setColumnStretch(0, 2);
  header->setColumnStretch(1, 1);

  auto* curves = new QWidget(this);
  auto* curvesLayout = new QVBoxLayout(curves);
  curvesLayout->setContentsMargins(0, 0, 0, 0);
  curvesLayout->addWidget(loss_, 3);
  auto* smoothRow = new QHBoxLayout;
  smoothRow->addWidget(new QLabel(tr("smoothing"), this));
  smoothRow->addWidget(smoothing_);
  curvesLayout->addLayout(smoothRow);
  lr_->setMinimumHeight(130);
  curvesLayout->addWidget(lr_, 1);

  auto* heads = new QWidget(this);
  auto* headsLayout = new QVBoxLayout(heads);
  headsLayout->setContentsMargins(0, 0, 0, 0);
  headsLayout->addWidget(tableChoice_);
  headsLayout->addWidget(grid_, 1);

  auto* maps = new QWidget(this);
  auto* mapsLayout = new QGridLayout(maps);
  mapsLayout->setContentsMargins(0, 0, 0, 0);
  mapsLayout->addWidget(mapsTitle_, 0, 0, 1, 2);
  mapsLayout->addWidget(softmaxMap_, 1, 0);
  mapsLayout->addWidget(linearMap_, 1, 1);
  mapsLayout->setRowStretch(1, 1);
  mapsTitle_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);

  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(curves);
  top->addWidget(heads);
  top->setStretchFactor(0, 3);
  top->setStretchFactor(1, 2);
  auto* bottom = new QSplitter(Qt::Horizontal, this);
  auto* side = new QSplitter(Qt::Vertical, this);
  side->addWidget(mono_);
  side->addWidget(log_);
  side->setStretchFactor(0, 3);
  side->setStretchFactor(1, 1);
  bottom->addWidget(maps);
  bottom->addWidget(side);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  auto* body = new QSplitter(Qt::Vertical, this);
  body->addWidget(top);
  body->addWidget(bottom);
  body->setStretchFactor(0, 1);
  body->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(header);
  layout->addWidget(body, 1);
}

}  // namespace hh::gui

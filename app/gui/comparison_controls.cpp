// Tool-bar form for the comparison settings (see comparison_controls.h).
#include "app/gui/comparison_controls.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>

namespace hh::gui {
namespace {

constexpr int kMaxLength = 4096;  // T: the heatmaps reduce large maps for display
constexpr int kMaxHeadDim = 128;  // D: Taylor features grow as D^2

QLabel* caption(const QString& text) {
  auto* label = new QLabel(text);
  label->setContentsMargins(8, 0, 2, 0);
  return label;
}

}  // namespace

ComparisonControls::ComparisonControls(const QStringList& featureMaps, QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 0, 4, 0);
  layout->setSpacing(4);

  featureMap_ = new QComboBox;
  featureMap_->addItems(featureMaps);
  featureMap_->setToolTip(tr("Feature map phi of the linear attention"));
  length_ = new QSpinBox;
  length_->setRange(2, kMaxLength);
  length_->setToolTip(tr("Sequence length T (queries = keys)"));
  headDim_ = new QSpinBox;
  headDim_->setRange(1, kMaxHeadDim);
  headDim_->setToolTip(tr("Head dimension D"));
  causal_ = new QCheckBox(tr("causal"));
  causal_->setToolTip(tr("Mask keys after each query (decoder attention)"));
  seed_ = new QSpinBox;
  seed_->setRange(0, 1'000'000);
  seed_->setToolTip(tr("Seed of the random queries and keys (and of Performer's projection)"));

  layout->addWidget(caption(tr("Feature map")));
  layout->addWidget(featureMap_);
  layout->addWidget(caption(tr("T")));
  layout->addWidget(length_);
  layout->addWidget(caption(tr("D")));
  layout->addWidget(headDim_);
  layout->addSpacing(8);
  layout->addWidget(causal_);
  layout->addWidget(caption(tr("Seed")));
  layout->addWidget(seed_);

  setSettings(ComparisonSettings{});
  connect(featureMap_, &QComboBox::currentIndexChanged, this, &ComparisonControls::settingsChanged);
  connect(length_, &QSpinBox::valueChanged, this, &ComparisonControls::settingsChanged);
  connect(headDim_, &QSpinBox::valueChanged, this, &ComparisonControls::settingsChanged);
  connect(causal_, &QCheckBox::toggled, this, &ComparisonControls::settingsChanged);
  connect(seed_, &QSpinBox::valueChanged, this, &ComparisonControls::settingsChanged);
}

ComparisonSettings ComparisonControls::settings() const {
  ComparisonSettings s;
  s.featureMap = featureMap_->currentText();
  s.length = length_->value();
  s.headDim = headDim_->value();
  s.causal = causal_->isChecked();
  s.seed = quint64(seed_->value());
  return s;
}

void ComparisonControls::setSettings(const ComparisonSettings& s) {
  const QSignalBlocker b1(featureMap_), b2(length_), b3(headDim_), b4(causal_), b5(seed_);
  const int index = featureMap_->findText(s.featureMap);
  if (index >= 0) featureMap_->setCurrentIndex(index);
  length_->setValue(s.length);
  headDim_->setValue(s.headDim);
  causal_->setChecked(s.causal);
  seed_->setValue(int(std::min<quint64>(s.seed, 1'000'000)));
}

}  // namespace hh::gui

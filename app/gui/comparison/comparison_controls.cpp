// Tool-bar form for the comparison settings (see comparison_controls.h).
#include "app/gui/comparison/comparison_controls.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QToolButton>

namespace hh::gui {
namespace {

constexpr int kMaxLength = 4096;  // T: the heatmaps reduce large maps for display
constexpr int kMaxHeadDim = 128;  // D: Taylor features grow as D^2
const QString kTrained = QStringLiteral("trained");

QLabel* caption(const QString& text) {
  auto* label = new QLabel(text);
  label->setContentsMargins(8, 0, 2, 0);
  return label;
}

}  // namespace

ComparisonControls::ComparisonControls(const QStringList& featureMaps, QWidget* parent) : QWidget(parent) {
  buildMapsMenu(featureMaps);
  buildHeadControls();
  arrange();
  setModel(0, 0, false);
  setSettings(ComparisonSettings{});
  connect(source_, &QComboBox::currentIndexChanged, this, [this] {
    updateEnabled();
    Q_EMIT settingsChanged();
  });
  for (QSpinBox* box : {layer_, head_, length_, headDim_, seed_})
    connect(box, &QSpinBox::valueChanged, this, &ComparisonControls::settingsChanged);
  connect(causal_, &QCheckBox::toggled, this, &ComparisonControls::settingsChanged);
}

// A menu button of checkable maps: the model's own trained map first (shown only for a
// converted model), then `featureMaps`.
void ComparisonControls::buildMapsMenu(const QStringList& featureMaps) {
  mapsMenu_ = new QMenu(this);
  const QStringList names = QStringList{kTrained} << featureMaps;
  for (const QString& name : names) {
    QAction* action = mapsMenu_->addAction(name);
    action->setCheckable(true);
    action->setData(name);
    if (name == kTrained) action->setVisible(false);
    connect(action, &QAction::toggled, this, [this] {
      updateMapsButton();
      Q_EMIT settingsChanged();
    });
  }
  mapsButton_ = new QToolButton;
  mapsButton_->setMenu(mapsMenu_);
  mapsButton_->setPopupMode(QToolButton::InstantPopup);
  mapsButton_->setToolTip(tr("Feature maps compared with softmax"));
  mapsButton_->setMaximumWidth(240);
}

// Which head: a random one (T, D, causal) or the loaded model's (layer, head); the seed serves both.
void ComparisonControls::buildHeadControls() {
  source_ = new QComboBox;
  source_->addItems({tr("random head"), tr("model head")});
  source_->setToolTip(tr("Random q, k ~ N(0, 1), or a head of the loaded model on the inspector's text"));
  layer_ = new QSpinBox;
  layer_->setPrefix(tr("layer "));
  head_ = new QSpinBox;
  head_->setPrefix(tr("head "));
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
}

void ComparisonControls::arrange() {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 0, 4, 0);
  layout->setSpacing(4);
  layout->addWidget(caption(tr("Maps")));
  layout->addWidget(mapsButton_);
  layout->addWidget(caption(tr("Head")));
  layout->addWidget(source_);
  layout->addWidget(layer_);
  layout->addWidget(head_);
  auto* tLabel = caption(tr("T"));
  auto* dLabel = caption(tr("D"));
  layout->addWidget(tLabel);
  layout->addWidget(length_);
  layout->addWidget(dLabel);
  layout->addWidget(headDim_);
  layout->addSpacing(8);
  layout->addWidget(causal_);
  layout->addWidget(caption(tr("Seed")));
  layout->addWidget(seed_);
  randomOnly_ = {tLabel, length_, dLabel, headDim_, causal_};
  modelOnly_ = {layer_, head_};
}

ComparisonSettings ComparisonControls::settings() const {
  ComparisonSettings s;
  s.featureMaps.clear();
  for (QAction* a : mapsMenu_->actions())
    if (a->isChecked() && a->isVisible()) s.featureMaps << a->data().toString();
  s.modelHead = source_->currentIndex() == 1;
  s.layer = layer_->value();
  s.head = head_->value();
  s.length = length_->value();
  s.headDim = headDim_->value();
  s.causal = causal_->isChecked();
  s.seed = quint64(seed_->value());
  return s;
}

void ComparisonControls::setSettings(const ComparisonSettings& s) {
  {
    const QSignalBlocker b1(source_), b2(layer_), b3(head_), b4(length_), b5(headDim_), b6(causal_), b7(seed_);
    for (QAction* a : mapsMenu_->actions()) {
      const QSignalBlocker block(a);
      a->setChecked(s.featureMaps.contains(a->data().toString()));
    }
    source_->setCurrentIndex(s.modelHead && source_->isEnabled() ? 1 : 0);
    layer_->setValue(s.layer);
    head_->setValue(s.head);
    length_->setValue(s.length);
    headDim_->setValue(s.headDim);
    causal_->setChecked(s.causal);
    seed_->setValue(int(std::min<quint64>(s.seed, 1'000'000)));
  }
  updateMapsButton();
  updateEnabled();
}

void ComparisonControls::setModel(int layers, int heads, bool trained) {
  const bool have = layers > 0 && heads > 0;
  {
    const QSignalBlocker b1(source_), b2(layer_), b3(head_);
    layer_->setRange(0, std::max(layers - 1, 0));
    head_->setRange(0, std::max(heads - 1, 0));
    if (!have) source_->setCurrentIndex(0);
    source_->setEnabled(have);
    for (QAction* a : mapsMenu_->actions()) {
      if (a->data().toString() != kTrained) continue;
      const QSignalBlocker block(a);
      a->setVisible(trained);
      a->setChecked(trained);  // a converted model: compare its own maps by default
    }
  }
  updateMapsButton();
  updateEnabled();
}

void ComparisonControls::showModelHead(int layer, int head) {
  if (!source_->isEnabled()) return;
  {
    const QSignalBlocker b1(source_), b2(layer_), b3(head_);
    source_->setCurrentIndex(1);
    layer_->setValue(layer);
    head_->setValue(head);
  }
  updateEnabled();
  Q_EMIT settingsChanged();
}

void ComparisonControls::updateMapsButton() {
  const QStringList maps = settings().featureMaps;
  mapsButton_->setText(maps.isEmpty() ? tr("(none)") : maps.join(QStringLiteral(", ")));
}

void ComparisonControls::updateEnabled() {
  const bool model = source_->currentIndex() == 1;
  for (QWidget* w : randomOnly_) w->setVisible(!model);
  for (QWidget* w : modelOnly_) w->setVisible(model);
}

}  // namespace hh::gui

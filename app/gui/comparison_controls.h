// The tool-bar form that picks what the attention comparison computes: feature map, sequence
// length T, head dim D, causal or not, and the random seed. Every edit emits settingsChanged();
// the window coalesces them before recomputing.
#pragma once
#include <QWidget>

#include "app/gui/attention_comparison.h"

class QCheckBox;
class QComboBox;
class QSpinBox;

namespace hh::gui {

class ComparisonControls : public QWidget {
  Q_OBJECT

 public:
  explicit ComparisonControls(const QStringList& featureMaps, QWidget* parent = nullptr);

  ComparisonSettings settings() const;
  // Shows `settings` without emitting settingsChanged (an unknown feature map keeps the current one).
  void setSettings(const ComparisonSettings& settings);

 Q_SIGNALS:
  void settingsChanged();

 private:
  QComboBox* featureMap_ = nullptr;
  QSpinBox* length_ = nullptr;
  QSpinBox* headDim_ = nullptr;
  QCheckBox* causal_ = nullptr;
  QSpinBox* seed_ = nullptr;
};

}  // namespace hh::gui

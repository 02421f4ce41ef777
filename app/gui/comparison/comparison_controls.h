// The tool-bar form that picks what the feature-map comparison computes: which feature maps
// (a menu of check boxes; "trained" appears when a converted model is loaded), which head (a
// random one of length T, head dim D and seed, or a layer/head of the loaded model on the
// inspector's text), and causality for a random head. Every edit emits settingsChanged(); the
// window coalesces them before recomputing.
#pragma once
#include <QWidget>

#include "app/gui/comparison/comparison_session.h"

class QCheckBox;
class QComboBox;
class QMenu;
class QSpinBox;
class QToolButton;

namespace hh::gui {

class ComparisonControls : public QWidget {
  Q_OBJECT

 public:
  explicit ComparisonControls(const QStringList& featureMaps, QWidget* parent = nullptr);

  ComparisonSettings settings() const;
  // Shows `settings` without emitting settingsChanged (unknown feature maps are skipped).
  void setSettings(const ComparisonSettings& settings);
  // A model was loaded (layers, heads > 0; `trained`: it has converted layers) or unloaded (0, 0).
  void setModel(int layers, int heads, bool trained);
  // Switches to that model head (emits settingsChanged).
  void showModelHead(int layer, int head);

 Q_SIGNALS:
  void settingsChanged();

 private:
  void buildMapsMenu(const QStringList& featureMaps);
  void buildHeadControls();
  void arrange();
  void updateMapsButton();
  void updateEnabled();

  QToolButton* mapsButton_ = nullptr;
  QMenu* mapsMenu_ = nullptr;
  QComboBox* source_ = nullptr;
  QSpinBox* layer_ = nullptr;
  QSpinBox* head_ = nullptr;
  QSpinBox* length_ = nullptr;
  QSpinBox* headDim_ = nullptr;
  QCheckBox* causal_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QList<QWidget*> randomOnly_, modelOnly_;
};

}  // namespace hh::gui

// PlanDialog: the per-layer attention plan behind the config form's "Plan…" button (the "plan"
// key: one spec per layer, engine/config/attention_types.h's parseLayerAttention form).
// One row per layer of the model: "Layer i" and an editable combo box of common specs
// ("softmax", "hedgehog", "hedgehog_window(16)", ..., every feature map name) where any spec can
// be typed. Quick fills set every row at once ("All softmax", "All <map>", "All
// hedgehog_window(64)"). OK checks each row with the engine's parser; a bad row is named in a
// warning and the dialog stays open. "Clear plan" accepts with an empty plan ([]), so the form
// goes back to feature_map / window / layers. planJson() is what the form's line edit gets.
#pragma once
#include <QDialog>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <vector>

class QComboBox;

namespace hh::gui {

class PlanDialog : public QDialog {
  Q_OBJECT

 public:
  // `initialSpecs` must list `layerCount` specs (see specsFromKeys); `currentMap` names the
  // "All <map>" quick fill.
  PlanDialog(int layerCount, const QStringList& initialSpecs, const QString& currentMap, QWidget* parent = nullptr);

  // The rows' specs, trimmed, layer 0 first.
  QStringList specs() const;
  void setAllSpecs(const QString& spec);
  // The combo box of one layer (object name "layer<i>"), or nullptr.
  QComboBox* row(int layer) const;
  // Empty when every row parses; else one line naming the first bad layer and the problem.
  QString validationError() const;
  // Valid after accept(): the JSON array of the specs, or "[]" after "Clear plan".
  QString planJson() const;
  bool cleared() const { return cleared_; }

  // The plan that feature_map / rule / window / layers describe, one spec per layer: the map,
  // with "_window(W)" when window > 0 and "/<rule>" when the rule is not additive, on `layers`
  // (empty = all), softmax elsewhere.
  static QStringList specsFromKeys(int layerCount, const QString& featureMap, const QString& rule, int64_t window,
                                   const std::vector<int64_t>& layers);
  // The choices every row offers.
  static QStringList commonSpecs();

 public Q_SLOTS:
  // The OK button: validates, shows the problem (non-blocking warning) or accepts.
  void acceptIfValid();
  // The "Clear plan" button: accepts with an empty plan.
  void clearPlan();

 private:
  std::vector<QComboBox*> rows_;
  bool cleared_ = false;
};

}  // namespace hh::gui

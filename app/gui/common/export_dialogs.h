// The workbench's export dialogs.
//   askFigureOptions: size (pixels for PNG, points for SVG/PDF) and, for PNG, the resolution in
//     dpi (96 dpi = the widget's own pixels; 192 dpi doubles them) -> FigureExportOptions, or
//     nullopt when cancelled.
//   WeightsExportDialog: where and how to write the loaded model's trained weights: a Hugging
//     Face-style folder in float32 / float16 / bfloat16, or the adapters alone (one safetensors
//     file).
#pragma once
#include <QDialog>

#include <optional>

#include "widgets/figure_export.h"

class QCheckBox;
class QComboBox;
class QLineEdit;

namespace hh::gui {

std::optional<hh::widgets::FigureExportOptions> askFigureOptions(QWidget* parent, QSize defaultSize, bool png);

class WeightsExportDialog : public QDialog {
  Q_OBJECT

 public:
  WeightsExportDialog(const QString& suggestedOutput, bool hasAdapters, QWidget* parent = nullptr);

  QString output() const;
  QString dtype() const;  // float32 | float16 | bfloat16
  bool adaptersOnly() const;

 private:
  QLineEdit* output_ = nullptr;
  QComboBox* dtype_ = nullptr;
  QCheckBox* adaptersOnly_ = nullptr;
};

}  // namespace hh::gui

// Where and in what precision the workbench runs a model it loads for the inspector and the
// generation tab: a device (auto, cpu, cuda:N; engine/core/device.h) and a compute dtype
// (float32, bfloat16; engine/config/compute_dtype.h), chosen with ComputeChoiceBox, a row of two
// combo boxes. New conversion takes the same two values as config keys.
#pragma once
#include <QComboBox>
#include <QString>
#include <QStringList>
#include <QWidget>

namespace hh::gui {

struct ComputeChoice {
  QString device = QStringLiteral("auto");
  QString dtype = QStringLiteral("float32");
};

// "auto", "cpu", and "cuda:N" for each GPU this build sees.
QStringList deviceChoices();
// "float32", "bfloat16".
QStringList dtypeChoices();

class ComputeChoiceBox : public QWidget {
  Q_OBJECT
 public:
  explicit ComputeChoiceBox(QWidget* parent = nullptr);
  ComputeChoice choice() const;
  void setChoice(const ComputeChoice& choice);

 Q_SIGNALS:
  void changed();  // the user picked another device or dtype

 private:
  QComboBox* device_;
  QComboBox* dtype_;
};

}  // namespace hh::gui

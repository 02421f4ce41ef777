#include "app/gui/common/compute_choice.h"

#include <QHBoxLayout>
#include <QLabel>

#include "engine/config/compute_dtype.h"
#include "engine/core/device.h"

namespace hh::gui {

QStringList deviceChoices() {
  QStringList out{QStringLiteral("auto"), QStringLiteral("cpu")};
  for (int i = 0; i < cudaDeviceCount(); ++i) out << QStringLiteral("cuda:%1").arg(i);
  return out;
}

QStringList dtypeChoices() {
  QStringList out;
  for (const auto& name : jobs::computeDtypeNames()) out << QString::fromStdString(name);
  return out;
}

ComputeChoiceBox::ComputeChoiceBox(QWidget* parent) : QWidget(parent) {
  device_ = new QComboBox;
  device_->setObjectName(QStringLiteral("device"));
  device_->addItems(deviceChoices());
  device_->setToolTip(cudaBuild() ? tr("auto: the first GPU when one is visible, else the CPU")
                                  : tr("This build has no CUDA (docs/gpu.md): the CPU only"));
  dtype_ = new QComboBox;
  dtype_->setObjectName(QStringLiteral("dtype"));
  dtype_->addItems(dtypeChoices());
  dtype_->setToolTip(tr("bfloat16: weights and activations in bf16 (half the memory); softmax, norms and "
                        "the linear attention's state in fp32. float64: everything in fp64 (slow; for telling "
                        "fp32's range from the method)"));
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(new QLabel(tr("device")));
  row->addWidget(device_);
  row->addWidget(new QLabel(tr("precision")));
  row->addWidget(dtype_);
  connect(device_, &QComboBox::activated, this, &ComputeChoiceBox::changed);
  connect(dtype_, &QComboBox::activated, this, &ComputeChoiceBox::changed);
}

ComputeChoice ComputeChoiceBox::choice() const { return {device_->currentText(), dtype_->currentText()}; }

void ComputeChoiceBox::setChoice(const ComputeChoice& choice) {
  device_->setCurrentText(choice.device);
  dtype_->setCurrentText(choice.dtype);
}

}  // namespace hh::gui

// Export dialogs (see export_dialogs.h).
#include "app/gui/common/export_dialogs.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

namespace hh::gui {
namespace {
constexpr int kMaxSide = 16000;
constexpr int kScreenDpi = 96;
}  // namespace

std::optional<hh::widgets::FigureExportOptions> askFigureOptions(QWidget* parent, QSize defaultSize, bool png) {
  QDialog dialog(parent);
  dialog.setWindowTitle(QObject::tr("Figure size"));
  auto* form = new QFormLayout(&dialog);
  auto* width = new QSpinBox;
  auto* height = new QSpinBox;
  for (QSpinBox* box : {width, height}) {
    box->setRange(16, kMaxSide);
    box->setSuffix(png ? QObject::tr(" px") : QObject::tr(" pt"));
  }
  // SVG and PDF sizes are points: the widget's pixels at the screen's 96 dpi make it as large.
  const QSize shown = png ? defaultSize : (QSizeF(defaultSize) * (72.0 / kScreenDpi)).toSize();
  width->setValue(shown.width());
  height->setValue(shown.height());
  auto* dpi = new QSpinBox;
  dpi->setRange(24, kScreenDpi * 8);
  dpi->setValue(png ? 2 * kScreenDpi : kScreenDpi);
  dpi->setSuffix(QObject::tr(" dpi"));
  dpi->setToolTip(QObject::tr("96 dpi writes one pixel per layout pixel; 192 dpi doubles them (sharp on print)"));
  dpi->setEnabled(png);
  form->addRow(QObject::tr("Width"), width);
  form->addRow(QObject::tr("Height"), height);
  form->addRow(QObject::tr("Resolution"), dpi);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
  QObject::connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  form->addRow(buttons);
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  hh::widgets::FigureExportOptions options;
  options.size = QSize(width->value(), height->value());
  options.scale = png ? double(dpi->value()) / kScreenDpi : 1.0;
  return options;
}

WeightsExportDialog::WeightsExportDialog(const QString& suggestedOutput, bool hasAdapters, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle(tr("Export weights"));
  auto* form = new QFormLayout(this);
  output_ = new QLineEdit(suggestedOutput);
  auto* browse = new QPushButton(tr("Browse\u2026"));
  auto* row = new QHBoxLayout;
  row->addWidget(output_, 1);
  row->addWidget(browse);
  dtype_ = new QComboBox;
  dtype_->addItems({QStringLiteral("float32"), QStringLiteral("float16"), QStringLiteral("bfloat16")});
  dtype_->setToolTip(tr("Storage type of the model's weights; feature maps stay float32"));
  adaptersOnly_ = new QCheckBox(tr("only the trained feature maps (adapters.safetensors)"));
  adaptersOnly_->setEnabled(hasAdapters);
  form->addRow(tr("Output"), row);
  form->addRow(tr("Weights"), dtype_);
  form->addRow(QString(), adaptersOnly_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  form->addRow(buttons);
  connect(adaptersOnly_, &QCheckBox::toggled, this, [this](bool on) {
    dtype_->setEnabled(!on);
    QString path = output_->text();
    if (on && !path.endsWith(QLatin1String(".safetensors"))) path += QStringLiteral("/adapters.safetensors");
    if (!on && path.endsWith(QLatin1String("/adapters.safetensors"))) path.chop(int(qstrlen("/adapters.safetensors")));
    output_->setText(path);
  });
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = adaptersOnly_->isChecked()
                             ? QFileDialog::getSaveFileName(this, tr("Adapters file"), output_->text(),
                                                            tr("Safetensors (*.safetensors)"))
                             : QFileDialog::getExistingDirectory(this, tr("Output folder"), output_->text());
    if (!path.isEmpty()) output_->setText(path);
  });
}

QString WeightsExportDialog::output() const { return output_->text().trimmed(); }
QString WeightsExportDialog::dtype() const { return dtype_->currentText(); }
bool WeightsExportDialog::adaptersOnly() const { return adaptersOnly_->isChecked(); }

}  // namespace hh::gui

// The per-layer plan dialog of the config form (see plan_dialog.h).
#include "app/gui/conversion/plan_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QVBoxLayout>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "app/gui/common/error_dialog.h"
#include "engine/config/attention_types.h"

namespace hh::gui {
namespace {

const QString kSoftmax = QStringLiteral("softmax");
const QString kWindow64 = QStringLiteral("hedgehog_window(64)");

QPushButton* quickFillButton(PlanDialog* dialog, const QString& spec, const QString& objectName) {
  auto* button = new QPushButton(PlanDialog::tr("All %1").arg(spec));
  button->setObjectName(objectName);
  button->setAutoDefault(false);
  QObject::connect(button, &QPushButton::clicked, dialog, [dialog, spec] { dialog->setAllSpecs(spec); });
  return button;
}

}  // namespace

QStringList PlanDialog::commonSpecs() {
  QStringList out{kSoftmax,
                  QStringLiteral("hedgehog"),
                  QStringLiteral("hedgehog_window(16)"),
                  kWindow64,
                  QStringLiteral("hedgehog_softmax"),
                  QStringLiteral("t2r")};
  for (auto kind : attn::allFeatureMapKinds()) {
    const QString name = QString::fromStdString(attn::toString(kind));
    if (!out.contains(name)) out << name;
  }
  return out;
}

QStringList PlanDialog::specsFromKeys(int layerCount, const QString& featureMap, const QString& rule, int64_t window,
                                      const std::vector<int64_t>& layers) {
  QString linear = featureMap.trimmed();
  if (window > 0) linear += QStringLiteral("_window(%1)").arg(window);
  const QString trimmedRule = rule.trimmed();
  if (!trimmedRule.isEmpty() && trimmedRule != QLatin1String("additive")) linear += '/' + trimmedRule;
  const std::set<int64_t> chosen(layers.begin(), layers.end());
  QStringList out;
  for (int layer = 0; layer < layerCount; ++layer)
    out << (chosen.empty() || chosen.count(layer) ? linear : kSoftmax);
  return out;
}

PlanDialog::PlanDialog(int layerCount, const QStringList& initialSpecs, const QString& currentMap, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle(tr("Attention plan"));
  auto* rowsWidget = new QWidget;
  auto* rowsLayout = new QFormLayout(rowsWidget);
  const QStringList choices = commonSpecs();
  for (int layer = 0; layer < layerCount; ++layer) {
    auto* combo = new QComboBox;
    combo->setObjectName(QStringLiteral("layer%1").arg(layer));
    combo->setEditable(true);
    combo->setInsertPolicy(QComboBox::NoInsert);
    combo->addItems(choices);
    combo->setCurrentText(layer < initialSpecs.size() ? initialSpecs[layer] : kSoftmax);
    combo->setMinimumContentsLength(22);
    rowsLayout->addRow(tr("Layer %1").arg(layer), combo);
    rows_.push_back(combo);
  }
  auto* scroll = new QScrollArea;
  scroll->setWidget(rowsWidget);
  scroll->setWidgetResizable(true);

  auto* quickFill = new QHBoxLayout;
  quickFill->addWidget(quickFillButton(this, kSoftmax, QStringLiteral("allSoftmax")));
  const QString map = currentMap.trimmed();
  if (!map.isEmpty() && map != kSoftmax && map != kWindow64)
    quickFill->addWidget(quickFillButton(this, map, QStringLiteral("allCurrentMap")));
  quickFill->addWidget(quickFillButton(this, kWindow64, QStringLiteral("allWindow")));
  quickFill->addStretch(1);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  QPushButton* clear = buttons->addButton(tr("Clear plan"), QDialogButtonBox::ResetRole);
  clear->setObjectName(QStringLiteral("clearPlan"));
  clear->setToolTip(tr("No per-layer plan ([]): feature map, window and layers decide the attention"));
  connect(buttons, &QDialogButtonBox::accepted, this, &PlanDialog::acceptIfValid);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(clear, &QPushButton::clicked, this, &PlanDialog::clearPlan);

  auto* layout = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("One attention per layer: <tt>softmax</tt>, or a feature map with an optional "
                              "<tt>_window(W)</tt> and <tt>/rule</tt>, e.g. <tt>hedgehog_window(16)</tt>, "
                              "<tt>t2r/gated</tt>, <tt>exp_t=2</tt>. A plan replaces feature map, rule, window "
                              "and layers."));
  intro->setWordWrap(true);
  layout->addWidget(intro);
  layout->addLayout(quickFill);
  layout->addWidget(scroll, 1);
  layout->addWidget(buttons);
  resize(480, std::min(640, 200 + 34 * layerCount));
}

QStringList PlanDialog::specs() const {
  QStringList out;
  for (const QComboBox* combo : rows_) out << combo->currentText().trimmed();
  return out;
}

void PlanDialog::setAllSpecs(const QString& spec) {
  for (QComboBox* combo : rows_) combo->setCurrentText(spec);
}

QComboBox* PlanDialog::row(int layer) const {
  return layer >= 0 && layer < int(rows_.size()) ? rows_[size_t(layer)] : nullptr;
}

QString PlanDialog::validationError() const {
  const QStringList all = specs();
  for (int layer = 0; layer < all.size(); ++layer) {
    if (all[layer].isEmpty()) return tr("Layer %1: no attention given (write softmax to keep it)").arg(layer);
    try {
      (void)attn::parseLayerAttention(all[layer].toStdString());
    } catch (const std::exception& e) {
      return tr("Layer %1: %2").arg(layer).arg(QString::fromStdString(e.what()));
    }
  }
  return {};
}

QString PlanDialog::planJson() const {
  // Written as people write it: ["softmax", "hedgehog_window(64)", "hedgehog"].
  QStringList quoted;
  if (!cleared_)
    for (const QString& spec : specs()) quoted << QString::fromStdString(nlohmann::json(spec.toStdString()).dump());
  return '[' + quoted.join(QStringLiteral(", ")) + ']';
}

void PlanDialog::acceptIfValid() {
  const QString error = validationError();
  if (!error.isEmpty()) {
    showErrorDialog(this, tr("Attention plan"), error);
    return;
  }
  cleared_ = false;
  accept();
}

void PlanDialog::clearPlan() {
  cleared_ = true;
  accept();
}

}  // namespace hh::gui

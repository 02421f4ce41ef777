// app.gui.plan_dialog: the config form's "Plan…" button and its per-layer dialog.
//   - with no model named, the button says to choose a model folder and opens no dialog;
//   - the dialog lists the model's layers (tiny-random-gpt2: 5) and starts from the form's
//     feature_map / rule / window / layers (the chosen layers the map, softmax elsewhere), or from
//     the plan field when it lists every layer; every row offers the common specs and every map;
//   - choosing specs (typed or by quick fill) and OK writes the JSON array the engine parses into
//     the plan field; "Clear plan" writes [];
//   - a bad row ("nonsense", "hedgehog_window(0)") is refused naming its layer: a warning is up,
//     the dialog stays open, the field is unchanged.
#include <QComboBox>
#include <QLineEdit>
#include <QMessageBox>
#include <QPointer>
#include <QPushButton>
#include <QTest>

#include "app/gui/common/error_dialog.h"
#include "app/gui/conversion/config_form.h"
#include "app/gui/conversion/plan_dialog.h"
#include "engine/config/attention_types.h"
#include "tests/support/hh_test.h"

namespace test_plan_dialog {

namespace {

constexpr int kFixtureLayers = 5;  // tiny-random-gpt2

// A convert form with the 5-layer fixture as its model.
void setUpForm(hh::gui::ConfigForm& form) {
  form.setJson(hh::jobs::toJson(hh::jobs::ConvertConfig{}));
  qobject_cast<QLineEdit*>(form.editor("model"))->setText(QString(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
}

QLineEdit* planField(const hh::gui::ConfigForm& form) { return qobject_cast<QLineEdit*>(form.editor("plan")); }

// Clicks "Plan…" and returns the dialog it opened (nullptr when none). Closed dialogs delete
// themselves later, so the newest child is the one just opened.
hh::gui::PlanDialog* openPlanDialog(hh::gui::ConfigForm& form) {
  auto* button = form.findChild<QPushButton*>("plan.edit");
  if (!button) return nullptr;
  const auto before = form.findChildren<hh::gui::PlanDialog*>().size();
  button->click();
  const auto dialogs = form.findChildren<hh::gui::PlanDialog*>();
  return dialogs.size() > before ? dialogs.last() : nullptr;
}

QMessageBox* errorDialogOf(const QObject* parent) { return parent->findChild<QMessageBox*>(hh::gui::kErrorDialogName); }

}  // namespace

class TestPlanDialog : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void withoutAModelItSaysSo() {
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(hh::jobs::ConvertConfig{}));
    QVERIFY(planField(form) != nullptr);
    QVERIFY(openPlanDialog(form) == nullptr);
    QMessageBox* box = errorDialogOf(&form);
    QVERIFY(box != nullptr);
    QVERIFY2(box->text().contains("model folder"), qPrintable(box->text()));
    box->close();
  }

  void prefillsFromTheFormKeys() {
    hh::gui::ConfigForm form;
    setUpForm(form);
    qobject_cast<QComboBox*>(form.editor("feature_map"))->setCurrentText("t2r");
    qobject_cast<QComboBox*>(form.editor("rule"))->setCurrentText("gated");
    qobject_cast<QLineEdit*>(form.editor("layers"))->setText("[1, 3]");
    QPointer<hh::gui::PlanDialog> dialog = openPlanDialog(form);
    QVERIFY(dialog);
    QCOMPARE(dialog->specs(), (QStringList{"softmax", "t2r/gated", "softmax", "t2r/gated", "softmax"}));
    QVERIFY(dialog->row(kFixtureLayers - 1) && !dialog->row(kFixtureLayers));
    QComboBox* row = dialog->row(0);
    QVERIFY(row->isEditable());
    for (const char* spec : {"softmax", "hedgehog", "hedgehog_window(16)", "hedgehog_window(64)", "hedgehog_softmax", "t2r"})
      QVERIFY2(row->findText(spec) >= 0, spec);
    for (auto kind : hh::attn::allFeatureMapKinds())
      QVERIFY(row->findText(QString::fromStdString(hh::attn::toString(kind))) >= 0);
    QVERIFY(dialog->findChild<QPushButton*>("allCurrentMap")->text().contains("t2r"));
    dialog->reject();
    QCOMPARE(planField(form)->text(), QString("[]"));  // cancel leaves the field alone

    // A window on every layer.
    qobject_cast<QComboBox*>(form.editor("feature_map"))->setCurrentText("hedgehog");
    qobject_cast<QComboBox*>(form.editor("rule"))->setCurrentText("additive");
    qobject_cast<QLineEdit*>(form.editor("layers"))->setText("[]");
    qobject_cast<QLineEdit*>(form.editor("window"))->setText("16");
    dialog = openPlanDialog(form);
    QVERIFY(dialog);
    QCOMPARE(dialog->specs(), QStringList(kFixtureLayers, QString("hedgehog_window(16)")));
    dialog->reject();
  }

  void prefillsFromAPlanOfTheModelsLength() {
    hh::gui::ConfigForm form;
    setUpForm(form);
    planField(form)->setText(R"json(["softmax", "elu", "softmax", "hedgehog_window(8)", "t2r"])json");
    QPointer<hh::gui::PlanDialog> dialog = openPlanDialog(form);
    QVERIFY(dialog);
    QCOMPARE(dialog->specs(), (QStringList{"softmax", "elu", "softmax", "hedgehog_window(8)", "t2r"}));
    dialog->reject();
    planField(form)->setText(R"json(["softmax", "elu"])json");  // another model's plan: the keys decide
    dialog = openPlanDialog(form);
    QVERIFY(dialog);
    QCOMPARE(dialog->specs(), QStringList(kFixtureLayers, QString("hedgehog")));
    dialog->reject();
  }

  void acceptingWritesThePlan() {
    hh::gui::ConfigForm form;
    setUpForm(form);
    QPointer<hh::gui::PlanDialog> dialog = openPlanDialog(form);
    QVERIFY(dialog);
    dialog->findChild<QPushButton*>("allWindow")->click();
    QCOMPARE(dialog->specs(), QStringList(kFixtureLayers, QString("hedgehog_window(64)")));
    dialog->findChild<QPushButton*>("allCurrentMap")->click();  // the form's map: hedgehog
    dialog->row(0)->setCurrentText("softmax");
    dialog->row(1)->setCurrentText("hedgehog_window(64)");
    dialog->row(4)->setCurrentText(" t2r/gated ");  // typed, spaces trimmed
    dialog->acceptIfValid();
    QVERIFY(errorDialogOf(dialog) == nullptr);
    QCOMPARE(planField(form)->text(),
             QString(R"json(["softmax", "hedgehog_window(64)", "hedgehog", "hedgehog", "t2r/gated"])json"));
    const auto config = hh::jobs::convertConfigFromJson(form.json());
    QCOMPARE(config.plan, (std::vector<std::string>{"softmax", "hedgehog_window(64)", "hedgehog", "hedgehog", "t2r/gated"}));
    QTRY_VERIFY(dialog.isNull());  // closed and deleted

    // Reopened: the rows are the plan; "Clear plan" goes back to the keys.
    dialog = openPlanDialog(form);
    QVERIFY(dialog);
    QCOMPARE(dialog->row(4)->currentText(), QString("t2r/gated"));
    dialog->findChild<QPushButton*>("clearPlan")->click();
    QCOMPARE(planField(form)->text(), QString("[]"));
    QVERIFY(hh::jobs::convertConfigFromJson(form.json()).plan.empty());
  }

  void aBadRowIsRefusedNamingItsLayer() {
    hh::gui::ConfigForm form;
    setUpForm(form);
    const QString before = planField(form)->text();
    QPointer<hh::gui::PlanDialog> dialog = openPlanDialog(form);
    QVERIFY(dialog);
    QVERIFY(dialog->validationError().isEmpty());
    dialog->row(2)->setCurrentText("nonsense");
    QString error = dialog->validationError();
    QVERIFY2(error.startsWith("Layer 2:") && error.contains("nonsense"), qPrintable(error));
    dialog->row(2)->setCurrentText("hedgehog");
    dialog->row(3)->setCurrentText("hedgehog_window(0)");
    error = dialog->validationError();
    QVERIFY2(error.startsWith("Layer 3:") && error.contains("window"), qPrintable(error));

    dialog->acceptIfValid();  // OK: a warning naming the layer, the dialog stays open
    QMessageBox* box = errorDialogOf(dialog);
    QVERIFY(box != nullptr);
    QCOMPARE(box->text(), error);
    box->close();
    QVERIFY(dialog && dialog->isVisible() && dialog->result() != QDialog::Accepted);
    QCOMPARE(planField(form)->text(), before);

    dialog->row(1)->setCurrentText("");  // an empty row is refused too
    dialog->row(3)->setCurrentText("hedgehog_window(16)");
    QVERIFY2(dialog->validationError().startsWith("Layer 1:"), qPrintable(dialog->validationError()));
    dialog->reject();
    QCOMPARE(planField(form)->text(), before);
  }
};

HH_TEST_SUITE(TestPlanDialog, "app.gui.plan_dialog", &TestPlanDialog::withoutAModelItSaysSo,
              &TestPlanDialog::prefillsFromTheFormKeys, &TestPlanDialog::prefillsFromAPlanOfTheModelsLength,
              &TestPlanDialog::acceptingWritesThePlan, &TestPlanDialog::aBadRowIsRefusedNamingItsLayer)

}  // namespace test_plan_dialog

#if HH_HAVE_QTEST
#include "test_plan_dialog.moc"
#endif

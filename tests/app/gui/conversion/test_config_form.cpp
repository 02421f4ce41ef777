// app.gui.config_form: the form over the convert config the CLI reads.
//   - the defaults round-trip: setJson(toJson(c)) then json() gives the same JSON back, float
//     notation and arrays included;
//   - integers past 2^31 - 1 (a seed of 3000000000, max_train_sequences 5000000000) come back
//     exactly; an integer past its key's range (uint64 or int64) is refused, not wrapped;
//   - a float field takes the JSON's 0.0025, not a German QLocale's 0,0025;
//   - edits reach the parsed config (distill.steps, distill.lr, layers, feature_map);
//   - the layers menu lists the model's layers (tiny-random-gpt2: 5) once a model is named, and
//     ticking layers writes the JSON list the parser reads ([] when all are ticked);
//   - an array that is not JSON is refused naming its key; the dialog refuses a config without
//     a model with the engine's message and stays open.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QPushButton>
#include <QTest>
#include <QToolButton>
#include <QValidator>

#include "app/gui/conversion/config_form.h"
#include "engine/core/device.h"
#include "engine/config/attention_types.h"
#include "tests/support/hh_test.h"

namespace test_config_form {

class TestConfigForm : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void defaultsRoundTrip() {
    hh::jobs::ConvertConfig c;
    c.modelDir = "projects/demo/teacher";
    c.distill.lr = 3e-05;
    c.layers = {0, 2};
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(c));
    QCOMPARE(QString::fromStdString(form.json().dump()), QString::fromStdString(hh::jobs::toJson(c).dump()));
  }

  void wideIntegersKeepTheirValue() {
    // A project's seed (uint64) and sequence counts (int64) past 2^31 - 1, read by the engine's
    // parser as the dialog's Load project does: the form gives back the very same numbers.
    const auto c = hh::jobs::convertConfigFromJson({{"seed", 3000000000ULL},
                                                    {"data", {{"max_train_sequences", 5000000000LL}}},
                                                    {"distill", {{"steps", 4294967296LL}}}});
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(c));
    const nlohmann::json back = form.json();
    QCOMPARE(QString::fromStdString(back.dump()), QString::fromStdString(hh::jobs::toJson(c).dump()));
    const auto again = hh::jobs::convertConfigFromJson(back);
    QCOMPARE(again.seed, uint64_t(3000000000ULL));
    QCOMPARE(again.data.maxTrainSequences, int64_t(5000000000LL));
    QCOMPARE(again.distill.steps, int64_t(4294967296LL));
    auto* seed = qobject_cast<QLineEdit*>(form.editor("seed"));
    auto* steps = qobject_cast<QLineEdit*>(form.editor("distill.steps"));
    QVERIFY(seed && steps && seed->validator());
    QCOMPARE(seed->text(), QString("3000000000"));
    // Typing past the key's range is refused, not wrapped: the seed takes 0 .. 2^64 - 1, an
    // int64 key -2^63 .. 2^63 - 1.
    QString text = "18446744073709551615";
    int pos = 0;
    QCOMPARE(seed->validator()->validate(text, pos), QValidator::Acceptable);
    text = "18446744073709551616";
    QCOMPARE(seed->validator()->validate(text, pos), QValidator::Invalid);
    text = "-1";
    QCOMPARE(seed->validator()->validate(text, pos), QValidator::Invalid);
    text = "9223372036854775808";
    QCOMPARE(steps->validator()->validate(text, pos), QValidator::Invalid);
    text = "-5";
    QCOMPARE(steps->validator()->validate(text, pos), QValidator::Acceptable);
    // A value set past the validator (setText) is refused by json(), naming its key.
    seed->setText("18446744073709551616");
    HH_VERIFY_THROWS_WITH(form.json(), "seed: not an integer");
    seed->setText("");
    HH_VERIFY_THROWS_WITH(form.json(), "seed: not an integer");
    seed->setText("18446744073709551615");
    QCOMPARE(form.json().at("seed").get<uint64_t>(), uint64_t(18446744073709551615ULL));
  }

  void numbersTakeTheJsonNotationInAnyLocale() {
    // A German user's QLocale writes 0,0025: the form's numbers are the JSON's, 0.0025.
    const QLocale before;
    QLocale::setDefault(QLocale(QLocale::German, QLocale::Germany));
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(hh::jobs::ConvertConfig{}));
    QLocale::setDefault(before);
    auto* lr = qobject_cast<QLineEdit*>(form.editor("distill.lr"));
    QVERIFY(lr && lr->validator());
    QString text = "0.0025";
    int pos = 0;
    QCOMPARE(lr->validator()->validate(text, pos), QValidator::Acceptable);
    text = "0,0025";
    QVERIFY(lr->validator()->validate(text, pos) != QValidator::Acceptable);
    lr->setText("0.0025");
    QCOMPARE(hh::jobs::convertConfigFromJson(form.json()).distill.lr, 0.0025);
  }

  void editsReachTheConfig() {
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(hh::jobs::ConvertConfig{}));
    auto* steps = qobject_cast<QLineEdit*>(form.editor("distill.steps"));
    auto* lr = qobject_cast<QLineEdit*>(form.editor("distill.lr"));
    auto* layers = qobject_cast<QLineEdit*>(form.editor("layers"));
    auto* map = qobject_cast<QComboBox*>(form.editor("feature_map"));
    auto* rule = qobject_cast<QComboBox*>(form.editor("rule"));
    auto* device = qobject_cast<QComboBox*>(form.editor("device"));
    QVERIFY(steps && lr && layers && map && rule && device);
    // The device: auto (the default), cpu, and each GPU the build sees.
    QCOMPARE(device->currentText(), QString("auto"));
    QCOMPARE(device->count(), 2 + hh::cudaDeviceCount());
    QVERIFY(device->findText("cpu") >= 0);
    // The compute dtype: float32 (the default), bfloat16 or float64.
    auto* dtype = qobject_cast<QComboBox*>(form.editor("dtype"));
    QVERIFY(dtype);
    QCOMPARE(dtype->currentText(), QString("float32"));
    QCOMPARE(dtype->count(), 3);
    QVERIFY(dtype->findText("bfloat16") >= 0 && dtype->findText("float64") >= 0);
    // The map and the rule are choices from the engine's names (still editable for a spec).
    QVERIFY(map->findText("hedgehog") >= 0 && map->findText("t2r") >= 0 && map->findText("cosformer") >= 0);
    QCOMPARE(rule->count(), int(hh::attn::allUpdateRules().size()));
    // The model folder has a Browse button beside it.
    QVERIFY(form.findChild<QPushButton*>("model.browse") != nullptr);
    steps->setText("42");
    lr->setText("0.0025");
    layers->setText("[1, 3]");
    map->setCurrentText("t2r");
    rule->setCurrentText("gated");
    device->setCurrentText("cpu");
    dtype->setCurrentText("bfloat16");
    const auto c = hh::jobs::convertConfigFromJson(form.json());
    QCOMPARE(c.device, std::string("cpu"));
    QCOMPARE(c.dtype, std::string("bfloat16"));
    QCOMPARE(c.distill.steps, int64_t(42));
    QCOMPARE(c.distill.lr, 0.0025);
    QCOMPARE(c.layers, (std::vector<int64_t>{1, 3}));
    QCOMPARE(c.featureMap, std::string("t2r"));
    QCOMPARE(c.rule, std::string("gated"));
  }

  void layersAreChosenFromTheModel() {
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(hh::jobs::ConvertConfig{}));
    auto* layers = qobject_cast<QLineEdit*>(form.editor("layers"));
    auto* button = form.findChild<QToolButton*>("layers.choose");
    QVERIFY(layers && button && button->menu());
    QMenu* menu = button->menu();
    Q_EMIT menu->aboutToShow();  // no model yet: one disabled line says why
    QCOMPARE(menu->actions().size(), 1);
    QVERIFY(!menu->actions()[0]->isEnabled());
    qobject_cast<QLineEdit*>(form.editor("model"))->setText(QString(HH_FIXTURES_DIR) + "/tiny-random-gpt2");
    Q_EMIT menu->aboutToShow();
    QCOMPARE(menu->actions().size(), 2 + 5);  // all, separator, five layers
    QVERIFY(menu->actions()[0]->isChecked());  // [] = all
    menu->findChild<QAction*>("layer3")->setChecked(true);
    QCOMPARE(layers->text(), QString("[3]"));
    menu->findChild<QAction*>("layer1")->setChecked(true);
    QCOMPARE(layers->text(), QString("[1,3]"));
    QCOMPARE(hh::jobs::convertConfigFromJson(form.json()).layers, (std::vector<int64_t>{1, 3}));
    Q_EMIT menu->aboutToShow();  // reopened: the ticks follow the text
    QVERIFY(!menu->actions()[0]->isChecked());
    QVERIFY(menu->findChild<QAction*>("layer1")->isChecked() && !menu->findChild<QAction*>("layer0")->isChecked());
    for (const char* name : {"layer0", "layer2", "layer4"}) menu->findChild<QAction*>(name)->setChecked(true);
    QCOMPARE(layers->text(), QString("[]"));  // every layer ticked: all
  }

  void badInputIsRefused() {
    hh::gui::ConfigForm form;
    form.setJson(hh::jobs::toJson(hh::jobs::ConvertConfig{}));
    qobject_cast<QLineEdit*>(form.editor("layers"))->setText("[1, ");
    try {
      (void)form.json();
      QFAIL("an invalid array was accepted");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).startsWith("layers"), e.what());
    }
    hh::gui::ConversionDialog dialog(hh::jobs::ConvertConfig{});
    QVERIFY(!dialog.validate());
    auto* error = dialog.findChild<QLabel*>();
    bool named = false;
    for (auto* label : dialog.findChildren<QLabel*>()) named |= label->text().contains("model");
    QVERIFY(error && named);
  }
};

HH_TEST_SUITE(TestConfigForm, "app.gui.config_form", &TestConfigForm::defaultsRoundTrip,
              &TestConfigForm::wideIntegersKeepTheirValue, &TestConfigForm::numbersTakeTheJsonNotationInAnyLocale,
              &TestConfigForm::editsReachTheConfig, &TestConfigForm::layersAreChosenFromTheModel,
              &TestConfigForm::badInputIsRefused)

}  // namespace test_config_form

#if HH_HAVE_QTEST
#include "test_config_form.moc"
#endif

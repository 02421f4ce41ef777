// The config form and the new-conversion dialog (see config_form.h).
#include "app/gui/conversion/config_form.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleValidator>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QPushButton>
#include <QSaveFile>
#include <QScrollArea>
#include <QSpinBox>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>
#include <QValidator>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include "app/gui/common/compute_choice.h"
#include "app/gui/common/error_dialog.h"
#include "app/gui/conversion/plan_dialog.h"
#include "engine/config/attention_types.h"
#include "engine/config/config_file.h"
#include "engine/config/model_config.h"

namespace hh::gui {
namespace {

using Json = nlohmann::json;

QString label(const std::string& key) { return QString::fromStdString(key).replace(QLatin1Char('_'), QLatin1Char(' ')); }

// The value at a dotted path, creating objects on the way.
Json& at(Json& root, const QString& dotted) {
  Json* node = &root;
  for (const QString& part : dotted.split(QLatin1Char('.'))) node = &(*node)[part.toStdString()];
  return *node;
}

// An integer field's text as the engine reads it: int64, or uint64 where the JSON holds an
// unsigned value (seeds); nullopt past that range or for anything but digits after an optional
// minus. Not a QSpinBox: it holds an int, and a seed of 3000000000 became -1294967296 there,
// which the engine read back as 2^64 - 1294967296.
std::optional<Json> parseInteger(const QString& text, bool isUnsigned) {
  const std::string s = text.toStdString();
  const char* first = s.data();
  const char* last = first + s.size();
  std::from_chars_result r{};
  Json value;
  if (isUnsigned) {
    uint64_t v = 0;
    r = std::from_chars(first, last, v);
    value = v;
  } else {
    int64_t v = 0;
    r = std::from_chars(first, last, v);
    value = v;
  }
  if (first == last || r.ec != std::errc() || r.ptr != last) return std::nullopt;
  return value;
}

QString integerRange(bool isUnsigned) {
  return isUnsigned ? QStringLiteral("0 to %1").arg(std::numeric_limits<uint64_t>::max())
                    : QStringLiteral("%1 to %2")
                          .arg(std::numeric_limits<int64_t>::min())
                          .arg(std::numeric_limits<int64_t>::max());
}

// Refuses a keystroke that leaves the field's range or is no integer (a lone "-" may be begun).
class IntegerValidator : public QValidator {
 public:
  IntegerValidator(bool isUnsigned, QObject* parent) : QValidator(parent), unsigned_(isUnsigned) {}
  State validate(QString& input, int&) const override {
    if (input.isEmpty() || (!unsigned_ && input == QLatin1String("-"))) return Intermediate;
    return parseInteger(input, unsigned_) ? Acceptable : Invalid;
  }

 private:
  bool unsigned_;
};

// The layer numbers in a "layers" field's JSON text (anything else in it ignored).
std::set<int64_t> layersIn(const QString& text) {
  std::set<int64_t> layers;
  const Json parsed = Json::parse(text.toStdString(), nullptr, false);
  if (parsed.is_array())
    for (const auto& v : parsed)
      if (v.is_number_integer()) layers.insert(v.get<int64_t>());
  return layers;
}

}  // namespace

ConfigForm::ConfigForm(QWidget* parent) : QWidget(parent) {
  layout_ = new QVBoxLayout(this);
  layout_->setContentsMargins(0, 0, 0, 0);
}

void ConfigForm::setJson(const Json& json) {
  shape_ = json;
  fields_.clear();
  delete content_;
  content_ = new QWidget;
  layout_->addWidget(content_);
  addObject(json, QString(), content_, 0);
}

void ConfigForm::addObject(const Json& object, const QString& prefix, QWidget* into, int depth) {
  auto* form = new QFormLayout;
  auto* outer = new QVBoxLayout(into);
  outer->setContentsMargins(depth == 0 ? 0 : 6, 4, 6, 4);
  outer->addLayout(form);
  for (auto it = object.begin(); it != object.end(); ++it) {
    const QString key = prefix.isEmpty() ? QString::fromStdString(it.key()) : prefix + '.' + QString::fromStdString(it.key());
    const Json& value = it.value();
    if (value.is_object()) {
      auto* group = new QGroupBox(label(it.key()));
      addObject(value, key, group, depth + 1);
      outer->addWidget(group);
      continue;
    }
    QWidget* editor = nullptr;
    switch (value.type()) {
      case Json::value_t::boolean: {
        auto* box = new QCheckBox;
        box->setChecked(value.get<bool>());
        editor = box;
        break;
      }
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned: {
        auto* edit = new QLineEdit(QString::fromStdString(value.dump()));  // the exact value, 64 bits
        const bool isUnsigned = value.type() == Json::value_t::number_unsigned;
        edit->setValidator(new IntegerValidator(isUnsigned, edit));
        edit->setPlaceholderText(integerRange(isUnsigned));
        editor = edit;
        break;
      }
      case Json::value_t::number_float: {
        auto* edit = new QLineEdit(QString::number(value.get<double>(), 'g', 10));
        // The JSON's notation (json() reads it with toDouble), not the user's QLocale: under de_DE
        // the validator took "0,0025", which json() then refused, and held "0.0025" unfinished.
        auto* validator = new QDoubleValidator(edit);
        validator->setLocale(QLocale::c());
        edit->setValidator(validator);
        editor = edit;
        break;
      }
      case Json::value_t::string: {
        const QString text = QString::fromStdString(value.get<std::string>());
        const QStringList options = choicesFor(key);
        if (options.isEmpty()) {
          editor = new QLineEdit(text);
        } else {  // the engine's names to pick from; still editable ("exp_t=3", a map spec)
          auto* combo = new QComboBox;
          combo->setEditable(true);
          combo->addItems(options);
          combo->setCurrentText(text);
          editor = combo;
        }
        break;
      }
      default:  // arrays (and null): their JSON text
        editor = new QLineEdit(QString::fromStdString(value.dump()));
        break;
    }
    editor->setObjectName(key);
    editor->setToolTip(key);
    form->addRow(label(it.key()), withPlanButton(key, withLayerMenu(key, withBrowseButton(key, editor))));
    fields_.push_back({key, value.type(), editor});
  }
}

QStringList ConfigForm::choicesFor(const QString& key) {
  QStringList out;
  if (key == QLatin1String("feature_map")) {
    for (auto kind : attn::allFeatureMapKinds()) out << QString::fromStdString(attn::toString(kind));
  } else if (key == QLatin1String("rule")) {
    for (auto rule : attn::allUpdateRules()) out << QString::fromStdString(attn::toString(rule));
  } else if (key == QLatin1String("device")) {
    out = deviceChoices();
  } else if (key == QLatin1String("dtype")) {
    out = dtypeChoices();
  } else if (key == QLatin1String("export.dtype")) {
    out << QStringLiteral("float32") << QStringLiteral("float16") << QStringLiteral("bfloat16");
  }
  return out;
}

QWidget* ConfigForm::withBrowseButton(const QString& key, QWidget* editor) {
  // Folders: the model, where runs and the converted model go. A button beside the field picks one.
  static const QStringList folders{QStringLiteral("model"), QStringLiteral("run_dir"), QStringLiteral("output_dir")};
  auto* edit = qobject_cast<QLineEdit*>(editor);
  if (!edit || !folders.contains(key)) return editor;
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit, 1);
  auto* browse = new QPushButton(tr("Browse\u2026"));
  browse->setObjectName(key + QStringLiteral(".browse"));
  connect(browse, &QPushButton::clicked, this, [this, edit, key] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Choose a folder for %1").arg(key), edit->text());
    if (!dir.isEmpty()) edit->setText(dir);
  });
  layout->addWidget(browse);
  return row;
}

int ConfigForm::modelLayerCount() const {
  const auto* model = qobject_cast<const QLineEdit*>(editor(QStringLiteral("model")));
  if (!model || model->text().isEmpty()) return 0;
  try {
    return int(models::loadModelConfig(model->text().toStdString()).layers);
  } catch (const std::exception&) {
    return 0;  // not a model folder (yet): the menu says so
  }
}

QWidget* ConfigForm::withLayerMenu(const QString& key, QWidget* editor) {
  // "layers" (the converted layers, [] = all): a menu of the model's layers beside the JSON text.
  auto* edit = qobject_cast<QLineEdit*>(editor);
  if (!edit || !(key == QLatin1String("layers") || key.endsWith(QLatin1String(".layers")))) return editor;
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit, 1);
  auto* button = new QToolButton;
  button->setObjectName(key + QStringLiteral(".choose"));
  button->setText(tr("Layers"));
  button->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(button);
  button->setMenu(menu);
  connect(menu, &QMenu::aboutToShow, this, [this, menu, edit] { fillLayerMenu(menu, edit); });
  layout->addWidget(button);
  return row;
}

void ConfigForm::fillLayerMenu(QMenu* menu, QLineEdit* edit) const {
  menu->clear();
  const int count = modelLayerCount();
  if (count <= 0) {
    menu->addAction(tr("Choose a model folder first: its layers are listed here"))->setEnabled(false);
    return;
  }
  const std::set<int64_t> chosen = layersIn(edit->text());
  QAction* all = menu->addAction(tr("All %1 layers").arg(count));
  all->setCheckable(true);
  all->setChecked(chosen.empty());
  connect(all, &QAction::triggered, edit, [edit] { edit->setText(QStringLiteral("[]")); });
  menu->addSeparator();
  for (int layer = 0; layer < count; ++layer) {
    QAction* action = menu->addAction(tr("Layer %1").arg(layer));
    action->setObjectName(QStringLiteral("layer%1").arg(layer));
    action->setCheckable(true);
    action->setChecked(chosen.count(layer) > 0);
    connect(action, &QAction::toggled, edit, [edit, layer, count](bool on) {
      std::set<int64_t> now = layersIn(edit->text());
      if (on) now.insert(layer); else now.erase(layer);
      if (int(now.size()) == count) now.clear();  // every layer: the same as all
      edit->setText(QString::fromStdString(Json(std::vector<int64_t>(now.begin(), now.end())).dump()));
    });
  }
}

QWidget* ConfigForm::withPlanButton(const QString& key, QWidget* editor) {
  // "plan" (one attention per layer, [] = none): a dialog of the model's layers beside the JSON text.
  auto* edit = qobject_cast<QLineEdit*>(editor);
  if (!edit || !(key == QLatin1String("plan") || key.endsWith(QLatin1String(".plan")))) return editor;
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit, 1);
  auto* button = new QPushButton(tr("Plan\u2026"));
  button->setObjectName(key + QStringLiteral(".edit"));
  button->setToolTip(tr("Choose the attention of each layer of the model"));
  connect(button, &QPushButton::clicked, this, [this, key, edit] { openPlanDialog(key, edit); });
  layout->addWidget(button);
  return row;
}

void ConfigForm::openPlanDialog(const QString& key, QLineEdit* edit) {
  const int count = modelLayerCount();
  if (count <= 0) {
    showErrorDialog(this, tr("Attention plan"), tr("Choose a model folder first: the plan lists its layers."));
    return;
  }
  const QString map = textOf(siblingEditor(key, QStringLiteral("feature_map")));
  // Non-blocking (open(), not exec()), so tests and the rest of the workbench go on while it is up.
  auto* dialog = new PlanDialog(count, initialPlan(key, edit, count), map, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &QDialog::accepted, edit, [dialog, edit] { edit->setText(dialog->planJson()); });
  dialog->open();
}

QStringList ConfigForm::initialPlan(const QString& key, const QLineEdit* edit, int layerCount) const {
  const Json current = Json::parse(edit->text().toStdString(), nullptr, false);
  if (current.is_array() && int(current.size()) == layerCount) {
    QStringList specs;
    for (const auto& v : current) specs << (v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString());
    return specs;
  }
  int64_t window = 0;
  if (const auto value = parseInteger(textOf(siblingEditor(key, QStringLiteral("window"))), false))
    window = value->get<int64_t>();
  std::vector<int64_t> layers;
  if (auto* layersEdit = qobject_cast<const QLineEdit*>(siblingEditor(key, QStringLiteral("layers")))) {
    const std::set<int64_t> chosen = layersIn(layersEdit->text());
    layers.assign(chosen.begin(), chosen.end());
  }
  QString map = textOf(siblingEditor(key, QStringLiteral("feature_map")));
  if (map.trimmed().isEmpty()) map = QStringLiteral("hedgehog");
  return PlanDialog::specsFromKeys(layerCount, map, textOf(siblingEditor(key, QStringLiteral("rule"))), window, layers);
}

QWidget* ConfigForm::siblingEditor(const QString& key, const QString& name) const {
  const int dot = key.lastIndexOf(QLatin1Char('.'));
  if (dot >= 0)
    if (QWidget* beside = editor(key.left(dot + 1) + name)) return beside;
  return editor(name);
}

QString ConfigForm::textOf(const QWidget* editor) {
  if (auto* combo = qobject_cast<const QComboBox*>(editor)) return combo->currentText();
  if (auto* edit = qobject_cast<const QLineEdit*>(editor)) return edit->text();
  return {};
}

Json ConfigForm::json() const {
  Json out = shape_;
  for (const Field& f : fields_) {
    Json& slot = at(out, f.key);
    switch (f.type) {
      case Json::value_t::boolean:
        slot = static_cast<QCheckBox*>(f.editor)->isChecked();
        break;
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned: {
        const bool isUnsigned = f.type == Json::value_t::number_unsigned;
        const QString text = static_cast<QLineEdit*>(f.editor)->text().trimmed();
        const std::optional<Json> v = parseInteger(text, isUnsigned);
        if (!v)
          throw std::invalid_argument(f.key.toStdString() + ": not an integer from " +
                                      integerRange(isUnsigned).toStdString() + ": '" + text.toStdString() + "'");
        slot = *v;
        break;
      }
      case Json::value_t::number_float: {
        bool ok = false;
        const double v = static_cast<QLineEdit*>(f.editor)->text().toDouble(&ok);
        if (!ok) throw std::invalid_argument(f.key.toStdString() + ": not a number");
        slot = v;
        break;
      }
      case Json::value_t::string:
        slot = textOf(f.editor).toStdString();
        break;
      default: {
        const std::string text = static_cast<QLineEdit*>(f.editor)->text().toStdString();
        Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded()) throw std::invalid_argument(f.key.toStdString() + ": not valid JSON: " + text);
        slot = std::move(parsed);
        break;
      }
    }
  }
  return out;
}

QWidget* ConfigForm::editor(const QString& dottedKey) const {
  for (const Field& f : fields_)
    if (f.key == dottedKey) return f.editor;
  return nullptr;
}

ConversionDialog::ConversionDialog(const jobs::ConvertConfig& initial, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("New conversion"));
  form_ = new ConfigForm;
  form_->setJson(jobs::toJson(initial));
  auto* scroll = new QScrollArea;
  scroll->setWidget(form_);
  scroll->setWidgetResizable(true);
  error_ = new QLabel;
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #b2182b"));
  processes_ = new QSpinBox;
  processes_->setObjectName(QStringLiteral("processes"));
  processes_->setRange(1, std::max(1, QThread::idealThreadCount()));
  processes_->setValue(1);
  processes_->setToolTip(
      tr("Data-parallel ranks on this machine. 1 runs the conversion inside the workbench (it can be "
         "paused). More run <tt>hedgehog convert --nproc N</tt>: every rank trains on its share of each "
         "batch and the gradients are averaged (c10d/Gloo), so the batch sizes above are the global "
         "batch over all ranks; the cores are shared between the ranks. Rank 0 writes the run files "
         "the dashboard follows; ranks &gt; 0 log to &lt;run_dir&gt;/rank-K.log. No pause on several "
         "processes; cancel stops every rank at the same step."));
  auto* processRow = new QHBoxLayout;
  auto* processLabel = new QLabel(tr("&Processes:"));
  processLabel->setBuddy(processes_);
  processLabel->setToolTip(processes_->toolTip());
  processRow->addWidget(processLabel);
  processRow->addWidget(processes_);
  processRow->addStretch(1);
  auto* buttons = new QDialogButtonBox;
  QPushButton* start = buttons->addButton(tr("Start"), QDialogButtonBox::AcceptRole);
  start->setDefault(true);
  buttons->addButton(QDialogButtonBox::Cancel);
  QPushButton* load = buttons->addButton(tr("Load project\u2026"), QDialogButtonBox::ActionRole);
  QPushButton* save = buttons->addButton(tr("Save as project\u2026"), QDialogButtonBox::ActionRole);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(start, &QPushButton::clicked, this, [this] {
    if (validate()) accept();
  });
  connect(load, &QPushButton::clicked, this, &ConversionDialog::loadProject);
  connect(save, &QPushButton::clicked, this, &ConversionDialog::saveProject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel(tr("The same settings as <tt>hedgehog convert --config</tt>; every default is "
                                  "written out. Distillation, finetuning (0 steps skips it), evaluation, export.")));
  layout->addWidget(scroll, 1);
  layout->addLayout(processRow);
  layout->addWidget(error_);
  layout->addWidget(buttons);
  resize(620, 760);
}

int ConversionDialog::processes() const { return processes_->value(); }

bool ConversionDialog::validate() {
  try {
    config_ = jobs::convertConfigFromJson(form_->json());
    if (config_.modelDir.empty()) throw std::invalid_argument("model: choose a model folder");
    if (config_.runDir.empty()) throw std::invalid_argument("run_dir: choose a folder for the run files");
  } catch (const std::exception& e) {
    error_->setText(QString::fromStdString(e.what()));
    return false;
  }
  error_->clear();
  return true;
}

void ConversionDialog::loadProject() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Load a project"), QStringLiteral("projects"),
                                                    tr("Project files (*.json)"));
  if (path.isEmpty()) return;
  try {
    // Through the engine's parser, so every default is filled in and unknown keys are refused.
    form_->setJson(jobs::toJson(jobs::convertConfigFromJson(jobs::readConfigFile(path.toStdString(), "convert"))));
    error_->clear();
  } catch (const std::exception& e) {
    error_->setText(QStringLiteral("%1: %2").arg(path, QString::fromStdString(e.what())));
  }
}

void ConversionDialog::saveProject() {
  if (!validate()) return;
  const QString path = QFileDialog::getSaveFileName(this, tr("Save as project"), QStringLiteral("projects/project.json"),
                                                    tr("Project files (*.json)"));
  if (path.isEmpty()) return;
  QSaveFile file(path);
  const QByteArray text = QByteArray::fromStdString(jobs::toJson(config_).dump(2) + "\n");
  if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size() || !file.commit())
    error_->setText(tr("Cannot write %1: %2").arg(path, file.errorString()));
}

}  // namespace hh::gui

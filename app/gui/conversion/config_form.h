// ConfigForm: an editable form over a job's JSON config (the same JSON the CLI's --config reads
// and --print-config writes), so the GUI starts jobs from exactly what the CLI would run.
// Every key gets an editor by its value's type: true/false a check box, integers a line edit that
// keeps their exact 64-bit value and refuses one past the key's range (int64, or uint64 for a
// value the JSON holds unsigned, e.g. a seed), other numbers a line edit that keeps their
// notation (3e-05 stays 3e-05), strings a line edit,
// arrays a line edit holding their JSON ("[0, 2]"), with a menu of the model's layers beside
// "layers" and a "Plan…" button beside "plan" (PlanDialog, one attention per layer); objects
// become titled groups, nested. Folder keys have a Browse button; feature_map,
// rule and export.dtype are editable combo boxes of the engine's names.
// json() reads the editors back into the same shape; an array that is not valid JSON, or an
// integer field that holds no integer of its range, throws std::invalid_argument naming its key.
// ConversionDialog: "Run > New conversion": the form over the convert config (defaults written
// out, the loaded model filled in), load/save as a project file, and Start, which validates with
// the engine's parser before closing (the parser's message is shown and the dialog stays).
// Below the form, "Processes" (1 to the machine's cores, default 1): 1 runs the job in the
// workbench; more run it data-parallel through the CLI (`hedgehog convert --nproc N`).
#pragma once
#include <QDialog>
#include <QStringList>
#include <QWidget>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/jobs/convert_job.h"

class QLabel;
class QLineEdit;
class QMenu;
class QSpinBox;
class QVBoxLayout;

namespace hh::gui {

class ConfigForm : public QWidget {
  Q_OBJECT

 public:
  explicit ConfigForm(QWidget* parent = nullptr);

  void setJson(const nlohmann::json& json);
  nlohmann::json json() const;
  // The editor of a dotted key ("distill.steps"), or nullptr.
  QWidget* editor(const QString& dottedKey) const;

 private:
  struct Field {
    QString key;  // dotted path
    nlohmann::json::value_t type;
    QWidget* editor;
  };
  void addObject(const nlohmann::json& object, const QString& prefix, QWidget* into, int depth);
  // The engine's names for a key that takes one (feature_map, rule, export.dtype), else empty.
  static QStringList choicesFor(const QString& key);
  // The editor of a folder key (model, run_dir, output_dir) with a Browse button beside it.
  QWidget* withBrowseButton(const QString& key, QWidget* editor);
  static QString textOf(const QWidget* editor);
  // The editor of a "layers" key with a menu beside it: "All N layers" and one check per layer of
  // the model named in the "model" field (read from its config.json when the menu opens).
  QWidget* withLayerMenu(const QString& key, QWidget* editor);
  void fillLayerMenu(QMenu* menu, QLineEdit* edit) const;
  // The editor of a "plan" key with a "Plan…" button beside it (object name "<key>.edit") that
  // opens a PlanDialog over the model's layers; its OK writes the JSON array into the field.
  QWidget* withPlanButton(const QString& key, QWidget* editor);
  void openPlanDialog(const QString& key, QLineEdit* edit);
  // The rows the dialog starts from: the field's plan when it lists every layer, else the plan
  // that the feature_map / rule / window / layers beside it describe.
  QStringList initialPlan(const QString& key, const QLineEdit* edit, int layerCount) const;
  // The editor of `name` beside a dotted key ("distill.plan" -> "distill.<name>"), else the
  // top-level one, or nullptr.
  QWidget* siblingEditor(const QString& key, const QString& name) const;
  int modelLayerCount() const;  // 0 when the model field names no readable model

  QVBoxLayout* layout_ = nullptr;
  QWidget* content_ = nullptr;
  std::vector<Field> fields_;
  nlohmann::json shape_;  // the last JSON set (keys and types)
};

class ConversionDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ConversionDialog(const jobs::ConvertConfig& initial, QWidget* parent = nullptr);

  ConfigForm* form() const { return form_; }
  // Valid after accept().
  const jobs::ConvertConfig& config() const { return config_; }
  // Local processes to run the conversion on (1: in the workbench).
  int processes() const;
  QSpinBox* processesBox() const { return processes_; }
  // Parses the form with the engine; on failure shows why and returns false.
  bool validate();

 private:
  void loadProject();
  void saveProject();

  ConfigForm* form_ = nullptr;
  QLabel* error_ = nullptr;
  QSpinBox* processes_ = nullptr;
  jobs::ConvertConfig config_;
};

}  // namespace hh::gui

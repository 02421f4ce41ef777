// RankView: the workbench's "Layer ranking" tab (Run > Rank layers…, Run > Open a ranking…):
// which layers are hard to convert, and a per-layer plan chosen by difficulty.
//   - above: the rank job's settings (the model folder, default the workbench's model; the
//     attention every layer is tried with, an editable combo; the distillation steps), Start,
//     Pause / Resume, Cancel, "Open a ranking…", a progress bar and the job's last log line. The
//     job (engine/jobs/rank_job.h, the CLI's `hedgehog rank`) runs on a worker thread
//     (RankRunner): the GUI stays live, Pause makes it wait at its next step, and Cancel stops it
//     within a step. Its folder is
//     runs/rank/<model folder's name> unless the base config names one.
//   - below: the ranking (RankResultsPanel): the layers x heads heatmap, the layers hardest first,
//     the budget and keep-as, the plan, and "Convert with this plan…" (convertRequested(); the
//     main window opens the New conversion form with results()->conversionConfig()).
// The settings the form does not show (data, batch size, lr, probe rows, keep, keep_as, seed)
// come from the base config: the engine's defaults unless setBaseConfig says otherwise.
#pragma once
#include <QString>
#include <QStringList>
#include <QWidget>

#include "engine/config/rank_config.h"

class QComboBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace hh::gui {

class RankResultsPanel;
class RankRunner;

class RankView : public QWidget {
  Q_OBJECT

 public:
  // The attentions offered to try (any layer spec can be typed).
  static QStringList attentionChoices();

  explicit RankView(QWidget* parent = nullptr);

  void setModelFolder(const QString& folder);
  QString modelFolder() const;
  void setBaseConfig(const jobs::RankConfig& config);
  // The base config with the form's model, attention and steps (and the default run folder).
  jobs::RankConfig config() const;

  // Starts the rank job on the worker. Returns an empty string, or why it could not start (no
  // model, a bad attention, a job already running).
  QString start();
  void cancel();
  bool running() const;
  // Shows a saved rank.json (and puts its settings in the form). Returns an error or empty.
  QString openRanking(const QString& path);

  RankResultsPanel* results() const { return results_; }
  RankRunner* runner() const { return runner_; }
  QComboBox* attentionBox() const { return attention_; }
  QSpinBox* stepsBox() const { return steps_; }
  QPushButton* startButton() const { return start_; }
  QPushButton* cancelButton() const { return cancel_; }
  QPushButton* pauseButton() const { return pause_; }
  QProgressBar* progressBar() const { return progress_; }
  QString logText() const;

 Q_SIGNALS:
  // A rank job ended (status completed | failed | cancelled); a completed one is on screen.
  void finished(const QString& status, const QString& message);
  // "Convert with this plan…" was pressed.
  void convertRequested();
  void statusMessage(const QString& text);

 private:
  QWidget* buildSettings();
  QHBoxLayout* buildInputRow();
  QHBoxLayout* buildStatusRow();
  void chooseModel();
  void chooseRanking();
  void setRunning(bool running);
  void setPaused(bool paused);
  void onProgress(qint64 step, qint64 total, const QString& phase);
  void onFinished(const QString& status, const QString& message);
  void showLog(const QString& text, bool error = false);

  RankRunner* runner_ = nullptr;
  RankResultsPanel* results_ = nullptr;
  QLineEdit* model_ = nullptr;
  QComboBox* attention_ = nullptr;
  QSpinBox* steps_ = nullptr;
  QPushButton* browse_ = nullptr;
  QPushButton* start_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QPushButton* pause_ = nullptr;
  QPushButton* open_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* log_ = nullptr;
  jobs::RankConfig base_;
};

}  // namespace hh::gui

// The generation panel: a prompt, sampling settings, and the original and the converted model
// generating side by side, their tokens streaming into two panes as they come. Below them, live:
// per-token latency and cache memory against position for both models, the norm of the
// recurrent state S per layer and head over the generated tokens (a heatmap: rows layer/head,
// columns tokens), and for the gated and decay rules the mean decay factor per layer.
// Loading and generation each run on a thread of their own (the GUI stays live while a large
// checkpoint loads); Stop sets a flag checked before every token. The folders, prompt and settings are remembered
// (QSettings) from one Generate to the next session. Torch-free.
#pragma once
#include <QWidget>

#include <atomic>
#include <memory>
#include <vector>

#include "app/gui/common/compute_choice.h"
#include "app/gui/generation/generation_session.h"

class QCheckBox;
class QDoubleSpinBox;
class QGridLayout;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTextEdit;
class QThread;
class QTimer;

namespace hh::widgets {
class CurvePlot;
class HeatmapView;
}  // namespace hh::widgets

namespace hh::gui {

class GenerationView : public QWidget {
  Q_OBJECT

 public:
  explicit GenerationView(QWidget* parent = nullptr);
  ~GenerationView() override;

  void setFolders(const QString& original, const QString& converted);
  // Loads the two folders (either may be empty) on a worker thread; Load and Generate wait
  // meanwhile. Errors go to the status line and statusMessage; modelsLoaded when done.
  void loadModels();
  bool loading() const { return loadThread_ != nullptr; }
  bool waitForLoad(int ms);  // blocks (processing events) until loading ends (tests); true if it did
  void setPrompt(const QString& prompt);
  ComputeChoiceBox* computeChoiceBox() const { return compute_; }  // device and precision for Load
  void setSettings(const GenerationSettings& settings);
  GenerationSettings settings() const;
  void generate();  // starts a run (no-op while one runs; while models load, once they have)
  void stop();
  bool running() const { return thread_ != nullptr; }
  // Blocks until the current run ends (tests); true if it did within `ms`.
  bool waitForRun(int ms);

  QString outputText(int side) const;
  hh::widgets::CurvePlot* latencyPlot() const { return latency_; }
  hh::widgets::CurvePlot* memoryPlot() const { return memory_; }
  hh::widgets::HeatmapView* stateView() const { return stateNorms_; }
  hh::widgets::CurvePlot* decayPlot() const { return decay_; }
  const std::vector<GenerationSummary>& summaries() const { return summaries_; }

 Q_SIGNALS:
  void modelsLoaded(const QString& problems);  // "" when every named folder loaded
  void finished(const QString& error);
  void statusMessage(const QString& text);

 private:
  QGridLayout* createFolderRow();
  QHBoxLayout* createControls();
  QSplitter* createOutputPanes();
  QSplitter* createPlots();
  void restoreLastSession();
  struct LoadedSide {
    QString error;  // "" when loaded (or when the field was empty: `cleared`)
    bool cleared = false;
    GenerationSideInfo info;
  };
  void onLoaded(const std::vector<LoadedSide>& sides);
  void onToken(const GenerationToken& token);
  void onFinished(const QString& error, const std::vector<GenerationSummary>& summaries);
  void refreshStateView();
  void updateButtons();
  void chooseFolder(QLineEdit* edit);
  void remember() const;  // folders, prompt and settings into QSettings (restored on construction)

  std::shared_ptr<GenerationSession> session_;
  QLineEdit* folders_[2] = {nullptr, nullptr};
  QLabel* headers_[2] = {nullptr, nullptr};
  QTextEdit* outputs_[2] = {nullptr, nullptr};
  QLabel* stats_[2] = {nullptr, nullptr};
  QPlainTextEdit* prompt_ = nullptr;
  QSpinBox* maxTokens_ = nullptr;
  QDoubleSpinBox* temperature_ = nullptr;
  QSpinBox* topK_ = nullptr;
  QDoubleSpinBox* topP_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QCheckBox* stopAtEos_ = nullptr;
  QPushButton* load_ = nullptr;
  QPushButton* generate_ = nullptr;
  QPushButton* stop_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  ComputeChoiceBox* compute_ = nullptr;
  hh::widgets::CurvePlot* latency_ = nullptr;
  hh::widgets::CurvePlot* memory_ = nullptr;
  hh::widgets::HeatmapView* stateNorms_ = nullptr;
  hh::widgets::CurvePlot* decay_ = nullptr;
  QTimer* stateTimer_ = nullptr;

  QThread* thread_ = nullptr;      // generation
  QThread* loadThread_ = nullptr;  // loading
  bool generateWhenLoaded_ = false;
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::vector<GenerationSummary> summaries_;
  // Converted side: one column of L*H state norms per token; decay per layer per token.
  std::vector<std::vector<float>> normColumns_;
  int stateLayers_ = 0, stateHeads_ = 0;
  double sideMs_[2] = {0, 0};
  int sideTokens_[2] = {0, 0};
};

}  // namespace hh::gui

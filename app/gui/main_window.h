// The workbench main window: a tool bar with the comparison settings, the attention
// comparison as the central view, a File menu (export the view as PNG / SVG / PDF) and a status
// bar with the compute device and Torch's thread count.
// Computations run on a one-thread pool (never on the GUI thread); edits are coalesced by a
// short timer and a result that an edit has overtaken is dropped.
#pragma once
#include <QMainWindow>

#include "app/gui/attention_comparison.h"

class QLabel;
class QThreadPool;
class QTimer;

namespace hh::gui {

class ComparisonControls;
class ComparisonView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Applies settings (e.g. from the command line) and recomputes.
  void setSettings(const ComparisonSettings& settings);
  ComparisonView* comparisonView() const { return view_; }
  // Whether a computation is queued or running.
  bool busy() const;

 Q_SIGNALS:
  // A computation finished and its result is on screen (or its error is shown).
  void comparisonReady();

 private:
  void buildMenus();
  void buildStatusBar();
  void scheduleCompute();
  void startCompute();
  void onComputed(const ComparisonResult& result, int generation);
  void exportFigure();

  ComparisonControls* controls_ = nullptr;
  ComparisonView* view_ = nullptr;
  QLabel* computeStatus_ = nullptr;
  QTimer* computeTimer_ = nullptr;
  QThreadPool* pool_ = nullptr;
  int generation_ = 0;  // bumped by every request; only the latest result is shown
  int running_ = 0;
};

}  // namespace hh::gui

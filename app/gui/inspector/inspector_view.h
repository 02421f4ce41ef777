// The attention inspector: type, paste or load a text; one forward pass of the loaded model
// fills a layer x head grid of small heatmaps, each framed in the colour of a per-head summary
// (softmax entropy, or KL(softmax || linear) and linear entropy on a converted model); clicking
// a head opens it large: token labels on both axes, colour bar, hover readout (query token, key
// token, weight, q.k/sqrt(d)), zoom and pan, and on a converted layer the linear weights or their
// difference to softmax. Long texts (thousands of tokens) stay responsive: the engine runs on the
// worker pool, the grid holds block-max thumbnails and the large map reduces for display.
// "Hide a needle" runs the recall probe (model_session.h) with the text as filler and colours the
// frames by the weight each head's answer positions put on the needle. While either runs, the grid
// fills layer by layer as the model reaches it, a bar counts the layers measured and Cancel (or
// Esc) stops it within one head's work; a newer request stops the one before it
// (inspector_progress.cpp).
// Torch-free: it drives a ModelSession on the given pool and drops results an edit overtook.
#pragma once
#include <QWidget>

#include <memory>

#include "app/gui/common/compute_choice.h"
#include "app/gui/common/latest_only.h"
#include "app/gui/inspector/model_session.h"

class QComboBox;
class QHBoxLayout;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QThreadPool;

namespace hh::widgets {
class HeadGrid;
class HeatmapView;
}  // namespace hh::widgets

namespace hh::gui {

class InspectorView : public QWidget {
  Q_OBJECT

 public:
  InspectorView(std::shared_ptr<ModelSession> session, QThreadPool* pool, QWidget* parent = nullptr);

  void setText(const QString& text);
  QString text() const;
  void setMaxTokens(int tokens);
  // A model was loaded (or replaced): clears the grid and enables inspection.
  void modelLoaded(const ModelSummary& summary);
  // Runs the model on the text (asynchronously; inspected() follows).
  void inspect();
  // The recall probe on the text (asynchronously; inspected() follows with result().recall set).
  void runRecallProbe();
  // Stops the inspection or recall probe in progress (inspected() follows, result().cancelled).
  void cancelInspection();
  bool inspecting() const { return inspecting_ > 0; }
  // Opens a head large (asynchronously; headShown() follows).
  void showHead(int layer, int head);
  // What the large map shows on a converted layer: 0 softmax, 1 linear, 2 linear - softmax.
  void setHeadView(int index);
  bool busy() const { return pending_ > 0; }
  int maxTokensLimit() const;  // the max-tokens box's maximum (the model's positions)
  QString infoText() const;    // the line above the grid: tokens, layers x heads, where a text was cut
  // The device and precision models are opened in (the row's two boxes).
  ComputeChoice computeChoice() const;
  ComputeChoiceBox* computeChoiceBox() const { return compute_; }

  const InspectResult& result() const { return result_; }
  // The open head (its scores are handed to headView() once shown: read them there).
  const HeadMaps& headMaps() const { return maps_; }
  hh::widgets::HeadGrid* grid() const { return grid_; }
  hh::widgets::HeatmapView* headView() const { return large_; }

 Q_SIGNALS:
  void inspected();
  void headShown();
  // A running inspection drew its `done`-th layer of `layers` into the grid (its bar says the same).
  void layerPreviewed(int done, int layers);
  // "Compare feature maps" on the open head.
  void compareRequested(int layer, int head);
  void statusMessage(const QString& text);
  // The user picked another device or precision: the open model is to be loaded again.
  void computeChoiceChanged();

 private:
  void loadTextFile();
  QWidget* buildTextPanel();
  QWidget* buildHeadPanel();
  QHBoxLayout* buildProbeControls();
  void connectControls();
  // Per-head summaries the grid can be coloured by (the colour-by box's entries, in order).
  enum Summary { EntropySoftmax = 0, Kl = 1, EntropyLinear = 2, NeedleSoftmax = 3, NeedleConverted = 4 };
  int summaryChoice() const;
  void styleGridFor(int choice);  // the frames' name, direction and legend for a Summary
  void onInspected(InspectResult result);
  // A layer measured by the request in flight: the bar advances, the grid gets its heads (the
  // first layer clears the last text's grid and head, whose place is kept for onInspected).
  void showLayerPreview(const LayerPreview& preview);
  void drawPreview(const LayerPreview& preview);  // one layer's heads, coloured by the choice
  // A new cancel flag (the previous request's set), the bar reset and shown: what inspect and
  // the recall probe hand the session. finishInspection() hides the bar when none is left.
  InspectControl beginInspection(bool probe);
  void finishInspection();
  void showNothingInspected(const QString& why);
  void onHeadMaps(HeadMaps maps);
  void applySummary();
  void applyHeadView();

  std::shared_ptr<ModelSession> session_;
  QThreadPool* pool_ = nullptr;
  QPlainTextEdit* textEdit_ = nullptr;
  QPushButton* runButton_ = nullptr;
  QSpinBox* maxTokens_ = nullptr;
  QComboBox* summaryChoice_ = nullptr;
  ComputeChoiceBox* compute_ = nullptr;
  QComboBox* viewChoice_ = nullptr;
  QPushButton* compareButton_ = nullptr;
  QComboBox* probeTask_ = nullptr;
  QSpinBox* probeLength_ = nullptr;
  QPushButton* probeButton_ = nullptr;
  QLabel* info_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  std::shared_ptr<std::atomic<bool>> cancel_;  // the newest inspection's
  int inspecting_ = 0;                         // inspections and probes in flight
  std::vector<LayerPreview> previews_;         // the request in flight's layers so far
  int reopenLayer_ = -1, reopenHead_ = -1;     // the head open before its first preview
  QLabel* hover_ = nullptr;
  hh::widgets::HeadGrid* grid_ = nullptr;
  hh::widgets::HeatmapView* large_ = nullptr;
  ModelSummary model_;
  InspectResult result_;
  HeadMaps maps_;
  LatestOnly inspectRequests_, headRequests_;  // only the newest result is shown
  int pending_ = 0;
};

}  // namespace hh::gui

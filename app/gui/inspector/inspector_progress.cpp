// The inspector while an inspection runs (see inspector_view.h): the bar, Cancel, and the grid
// filling layer by layer from the session's previews.
#include <QMetaObject>
#include <QProgressBar>
#include <QPushButton>

#include <algorithm>
#include <cmath>

#include "app/gui/inspector/inspector_view.h"
#include "widgets/head_grid.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {

InspectControl InspectorView::beginInspection(bool probe) {
  if (cancel_) cancel_->store(true);  // the request before this one is stale: it stops
  // A plain inspection has no needle to colour by.
  if (!probe && summaryChoice() >= NeedleSoftmax)
    summaryChoice_->setCurrentIndex(model_.converted() ? Kl : EntropySoftmax);
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  ++inspecting_;
  progress_->setRange(0, std::max(1, model_.layers));
  progress_->setValue(0);
  progress_->show();
  cancelButton_->setEnabled(true);
  cancelButton_->show();
  InspectControl control;
  control.cancel = cancel_;
  std::weak_ptr<std::atomic<bool>> mine = cancel_;
  control.layerDone = [this, mine](const LayerPreview& preview) {  // on the worker thread
    QMetaObject::invokeMethod(
        this,
        [this, mine, preview] {
          if (mine.lock() == cancel_) showLayerPreview(preview);  // not an older request's
        },
        Qt::QueuedConnection);
  };
  return control;
}

void InspectorView::showLayerPreview(const LayerPreview& p) {
  progress_->setRange(0, p.layers);
  progress_->setValue(p.done);
  if (p.done == 1) {  // the first layer of a new text: the last text's grid and head go
    if (maps_.length > 0) {
      reopenLayer_ = maps_.layer;
      reopenHead_ = maps_.head;
    }
    previews_.clear();
    result_ = InspectResult{};
    maps_ = HeadMaps{};
    large_->clear();
    large_->setTitle(QString());
    compareButton_->setEnabled(false);
    viewChoice_->setEnabled(false);
    grid_->clear();
    grid_->setGridSize(p.layers, p.heads);
    styleGridFor(summaryChoice());
  }
  previews_.push_back(p);
  drawPreview(p);
  Q_EMIT layerPreviewed(p.done, p.layers);
}

void InspectorView::drawPreview(const LayerPreview& p) {
  const int choice = summaryChoice();
  const std::vector<double> none(size_t(p.heads), std::nan(""));
  const auto& needle = choice == NeedleSoftmax ? p.needleSoftmax : p.needleConverted;
  const auto& values = choice >= NeedleSoftmax   ? (needle.empty() ? none : needle)
                       : choice == Kl            ? p.kl
                       : choice == EntropyLinear ? p.entropyLinear
                                                 : p.entropySoftmax;
  for (int h = 0; h < p.heads; ++h)
    grid_->setCell(p.layer, h, p.thumbSize, p.thumbSize, p.thumbnails[size_t(h)], values[size_t(h)]);
}

void InspectorView::finishInspection() {
  if (--inspecting_ > 0) return;
  progress_->hide();
  cancelButton_->hide();
}

void InspectorView::cancelInspection() {
  if (inspecting_ == 0 || !cancel_) return;
  cancel_->store(true);
  cancelButton_->setEnabled(false);
  info_->setText(tr("Cancelling\u2026"));
}

}  // namespace hh::gui

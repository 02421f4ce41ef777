// ModelTree: the loaded model as a tree for the "Model" dock: what it is (family, sizes,
// parameter count), its layers with their attention (softmax or the linear feature map) and
// per-layer parameter count, each layer's heads, and the pre-flight report (blockers, warnings,
// the full text). Double-clicking a head emits headActivated (the window opens it in the
// inspector). Plain data in (a ModelSummary); Torch-free.
#pragma once
#include <QTreeWidget>

#include "app/gui/inspector/model_session.h"

namespace hh::gui {

class ModelTree : public QTreeWidget {
  Q_OBJECT

 public:
  explicit ModelTree(QWidget* parent = nullptr);

  void setSummary(const ModelSummary& summary);
  // A failed load: the reason (and any blockers) in place of the tree.
  void showError(const QString& message, const QStringList& blockers = {});
  void showEmpty();  // what to do to open one

 Q_SIGNALS:
  void headActivated(int layer, int head);
};

}  // namespace hh::gui

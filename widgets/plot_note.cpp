#include "widgets/plot_note.h"

#include "widgets/qcp.h"

namespace hh::widgets {

QCPItemText* addCentredNote(QCustomPlot* plot) {
  auto* note = new QCPItemText(plot);  // owned by the plot
  note->position->setType(QCPItemPosition::ptAxisRectRatio);
  note->position->setCoords(0.5, 0.5);
  note->setPositionAlignment(Qt::AlignCenter);
  note->setTextAlignment(Qt::AlignCenter);
  note->setColor(QColor(0x5f, 0x66, 0x70));
  note->setClipToAxisRect(true);
  return note;
}

}  // namespace hh::widgets

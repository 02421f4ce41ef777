// A line of grey text centred in a QCustomPlot's axis rect: what an empty plot shows instead of
// data (e.g. "No steps yet"). Hidden or shown by its owner; clipped to the axis rect.
#pragma once

class QCustomPlot;
class QCPItemText;

namespace hh::widgets {

QCPItemText* addCentredNote(QCustomPlot* plot);

}  // namespace hh::widgets

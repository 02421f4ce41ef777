// QCustomPlot for a build with QT_NO_KEYWORDS (top-level CMakeLists.txt): its header says
// `signals:` and `foreach`, so they are spelled out as Qt's macros around the include only.
#pragma once
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef foreach
#undef signals

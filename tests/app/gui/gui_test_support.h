// Helpers shared by the workbench suites.
#pragma once
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTimer>

#include <algorithm>

namespace hh::test {

// Spins the event loop until `done()` or `ms` pass and returns the longest gap (ms) between the
// ticks of a 10 ms timer: how long the GUI thread was unable to run its events.
template <typename Done>
double spinMeasuringLatency(int ms, Done done) {
  QElapsedTimer total, sinceTick;
  total.start();
  sinceTick.start();
  double worst = 0;
  QTimer ticker;
  ticker.setInterval(10);
  QObject::connect(&ticker, &QTimer::timeout, [&] {
    worst = std::max(worst, double(sinceTick.nsecsElapsed()) / 1e6);
    sinceTick.restart();
  });
  ticker.start();
  while (!done() && total.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
  return worst;
}

}  // namespace hh::test

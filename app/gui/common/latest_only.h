// LatestOnly: background work whose result matters only while nothing newer was asked for. The
// views run a model, a scan or a comparison on a thread pool while the user keeps clicking; each
// run() makes the requests still in flight stale, and only the newest result reaches `use`.
//   run(pool, receiver, work, use, settled): `work()` on `pool`; then, on `receiver`'s thread,
//     `settled()` (optional: every request, stale or not, e.g. to count what is pending) and
//     `use(result)` when no newer run() or drop() came in between.
//   drop(): every request in flight becomes stale (a new file opened, the view closing).
//   current(), isCurrent(ticket): for work that `use` itself defers (a later event).
// One object per kind of request; used on the receiver's (GUI) thread only. The receiver must
// outlive the pool's work (the views wait for their pools in their destructors).
#pragma once
#include <QMetaObject>
#include <QObject>
#include <QThreadPool>

#include <functional>
#include <utility>

namespace hh::gui {

class LatestOnly {
 public:
  template <typename Work, typename Use>
  void run(QThreadPool* pool, QObject* receiver, Work work, Use use, std::function<void()> settled = {}) {
    const int ticket = ++current_;
    pool->start([this, receiver, ticket, work = std::move(work), use = std::move(use), settled = std::move(settled)]() mutable {
      auto result = work();
      QMetaObject::invokeMethod(
          receiver,
          [this, ticket, result = std::move(result), use = std::move(use), settled = std::move(settled)]() mutable {
            if (settled) settled();
            if (ticket == current_) use(std::move(result));
          },
          Qt::QueuedConnection);
    });
  }
  void drop() { ++current_; }
  int current() const { return current_; }
  bool isCurrent(int ticket) const { return ticket == current_; }

 private:
  int current_ = 0;
};

}  // namespace hh::gui

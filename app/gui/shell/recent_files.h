// RecentFiles: the File > Recent menu, kept in QSettings ("recent": up to kMax entries, newest
// first, each "kind|path" with kind model | project | run). Choosing an entry emits
// openRequested(kind, path); entries whose path is gone are shown disabled.
#pragma once
#include <QObject>
#include <QStringList>

class QMenu;

namespace hh::gui {

class RecentFiles : public QObject {
  Q_OBJECT

 public:
  static constexpr int kMax = 12;

  explicit RecentFiles(QMenu* menu, QObject* parent = nullptr);

  void add(const QString& kind, const QString& path);
  // "kind|path" entries, newest first.
  QStringList entries() const;
  void clear();

 Q_SIGNALS:
  void openRequested(const QString& kind, const QString& path);

 private:
  void rebuild();
  QMenu* menu_;
};

}  // namespace hh::gui

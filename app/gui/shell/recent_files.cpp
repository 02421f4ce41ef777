// File > Recent (see recent_files.h).
#include "app/gui/shell/recent_files.h"

#include <QAction>
#include <QDir>
#include <QFileInfo>
#include <QMenu>
#include <QSettings>

namespace hh::gui {
namespace {
const QString kKey = QStringLiteral("recent");
}  // namespace

RecentFiles::RecentFiles(QMenu* menu, QObject* parent) : QObject(parent), menu_(menu) { rebuild(); }

QStringList RecentFiles::entries() const { return QSettings().value(kKey).toStringList(); }

void RecentFiles::add(const QString& kind, const QString& path) {
  const QString entry = kind + QLatin1Char('|') + QFileInfo(path).absoluteFilePath();
  QStringList list = entries();
  list.removeAll(entry);
  list.prepend(entry);
  while (list.size() > kMax) list.removeLast();
  QSettings().setValue(kKey, list);
  rebuild();
}

void RecentFiles::clear() {
  QSettings().remove(kKey);
  rebuild();
}

void RecentFiles::rebuild() {
  menu_->clear();
  const QStringList list = entries();
  for (const QString& entry : list) {
    const int bar = entry.indexOf(QLatin1Char('|'));
    if (bar <= 0) continue;
    const QString kind = entry.left(bar), path = entry.mid(bar + 1);
    QAction* action = menu_->addAction(QStringLiteral("%1  \u2014  %2").arg(QDir::toNativeSeparators(path), kind));
    action->setEnabled(QFileInfo::exists(path));
    connect(action, &QAction::triggered, this, [this, kind, path] { Q_EMIT openRequested(kind, path); });
  }
  if (list.isEmpty()) menu_->addAction(tr("(none)"))->setEnabled(false);
  menu_->addSeparator();
  menu_->addAction(tr("Clear the list"), this, &RecentFiles::clear);
}

}  // namespace hh::gui

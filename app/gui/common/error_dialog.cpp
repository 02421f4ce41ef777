#include "app/gui/common/error_dialog.h"

#include <QMessageBox>

namespace hh::gui {

QMessageBox* showErrorDialog(QWidget* parent, const QString& title, const QString& message) {
  auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, parent);
  box->setObjectName(QLatin1String(kErrorDialogName));
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setTextFormat(Qt::PlainText);  // paths and JSON excerpts are not HTML
  box->setTextInteractionFlags(Qt::TextSelectableByMouse);  // so the error can be copied into a report
  box->open();
  return box;
}

}  // namespace hh::gui

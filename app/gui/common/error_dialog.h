// One way for the workbench to report a failure the user must see: a warning dialog whose text is
// the engine's one-line error (which names the file), opened window-modal without blocking the
// event loop, so a worker's result, a timer or a test can go on while it is up. Every "could not
// open / read / write" path of the main window goes through here (see docs/reliability.md).
#pragma once
#include <QString>

class QWidget;
class QMessageBox;

namespace hh::gui {

// Object name of every such dialog (tests find them by it).
inline constexpr const char* kErrorDialogName = "hhErrorDialog";

// Shows `message` under `title` and returns the dialog (deleted when closed). Long messages
// stay on one line in the text and are wrapped by the box, never cut.
QMessageBox* showErrorDialog(QWidget* parent, const QString& title, const QString& message);

}  // namespace hh::gui

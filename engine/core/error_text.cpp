// errorText (see error_text.h).
#include "engine/core/error_text.h"

#include <c10/util/Exception.h>

namespace hh {

std::string errorText(const std::exception& error) {
  if (const auto* torchError = dynamic_cast<const c10::Error*>(&error)) return torchError->what_without_backtrace();
  return error.what();
}

}  // namespace hh

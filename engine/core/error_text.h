// The text of an error for a person: Torch's own errors (c10::Error) carry the C++ stack trace of
// where they were raised in what(); this leaves it out, keeping the message and its context lines.
// Every place that shows an engine error (the CLI's error line, a run file's failure message, a
// workbench dialog) goes through it.
#pragma once
#include <exception>
#include <string>

namespace hh {

std::string errorText(const std::exception& error);

}  // namespace hh

// A C-library locale whose decimal point is a comma, for the tests that numbers are read and
// written the same whatever the user's locale: an installed one, else one generated with
// localedef from the `locales` package's sources (scripts/setup.sh installs them) into a folder
// that LOCPATH then names for this process and its children (glibc reads LOCPATH at each load).
// Qt-free: engine suites use it too.
#pragma once
#include <langinfo.h>
#include <locale.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace hh::test {

// The first of a few common comma-decimal locales that loads, or "".
inline std::string installedCommaLocale() {
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "de_DE", "fr_FR"}) {
    locale_t locale = newlocale(LC_NUMERIC_MASK, name, locale_t(0));
    if (!locale) continue;
    const bool comma = std::string(nl_langinfo_l(RADIXCHAR, locale)) == ",";
    freelocale(locale);
    if (comma) return name;
  }
  return "";
}

// A comma-decimal locale's name ("" when none is installed and none can be generated).
inline std::string commaDecimalLocale() {
  if (auto name = installedCommaLocale(); !name.empty()) return name;
  namespace fs = std::filesystem;
  std::error_code ignored;
  if (!fs::exists("/usr/share/i18n/locales/de_DE", ignored)) return "";
  // One folder per user, generated once: into a folder of this process's own, then renamed.
  const fs::path folder = fs::temp_directory_path() / ("hh-test-locales-" + std::to_string(getuid()));
  if (!fs::exists(folder / "de_DE.UTF-8", ignored)) {
    const fs::path partial = folder.string() + ".partial-" + std::to_string(getpid());
    fs::create_directories(partial, ignored);
    const std::string command =
        "localedef -i de_DE -f UTF-8 '" + (partial / "de_DE.UTF-8").string() + "' > /dev/null 2>&1";
    if (std::system(command.c_str()) == 0) fs::rename(partial, folder, ignored);  // a race lost: theirs stays
    fs::remove_all(partial, ignored);
  }
  setenv("LOCPATH", folder.c_str(), 1);
  return installedCommaLocale();
}

}  // namespace hh::test

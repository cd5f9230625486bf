// Writes a whole file or nothing: a report, an exported view or a session is
// written to a temporary file beside its path and renamed over it (QSaveFile),
// so a full disk or a crash never leaves half a file.
#pragma once

#include <QString>
#include <string>

#include "tessera/planner/status.h"

namespace tessera::gui {

Status save_whole_file(const QString& path, const std::string& bytes);

// "cannot write PATH: WHY", the error of a file not written.
Error write_error(const QString& path, const QString& why);

}  // namespace tessera::gui

// `tessera-gui SESSION.json --export FILE`: the session's inputs searched and
// exported as the window's Export does (PDF report, SVG or PNG of the plans
// view, plan.json, CSV, Markdown or HTML), without a window on screen.
#pragma once

#include <QString>

#include "tessera/planner/status.h"

namespace tessera::gui {

Status export_session(const QString& session_path, const QString& export_path);

}  // namespace tessera::gui

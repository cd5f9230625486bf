// Runs the event loop until the session's plan search has delivered, for the
// modes without a user (screenshots, exports from the command line).
#pragma once

#include "planner_session.h"

namespace tessera::gui {

// False when the search is still running after `timeout_ms`.
bool await_search(const PlannerSession& session, int timeout_ms);

}  // namespace tessera::gui

// A session file: the inputs as JSON ({"schema": 1, "kind": "tessera-gui-session", ...}),
// with the planner's spellings for every choice, so it can be read by people and tools.
#pragma once

#include <string>
#include <string_view>

#include "planner_inputs.h"

namespace tessera::gui {

std::string session_to_json(const PlannerInputs& inputs);
Result<PlannerInputs> session_from_json(std::string_view text, const std::string& source);

Status save_session(const std::string& path, const PlannerInputs& inputs);
Result<PlannerInputs> load_session(const std::string& path);

}  // namespace tessera::gui

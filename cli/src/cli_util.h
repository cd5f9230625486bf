// Helpers every verb uses: the one-line error with exit code 2, and reading an
// enum option by its spelling.
#pragma once

#include <ostream>
#include <string>

#include "cli_app.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/status.h"
#include "tessera/planner/text_util.h"

namespace tessera::cli {

// Prints "tessera: error: MESSAGE" as one line and returns the usage exit code.
// One write: the ranks under mpirun share one stderr, and unbuffered pieces
// of their lines would interleave.
inline int fail(std::ostream& err, const std::string& message) {
  err << "tessera: error: " + planner::one_line(message, 400) + "\n";
  return kExitUsage;
}

template <typename E>
Status parse_choice(const char* option, const std::string& text, E& out) {
  if (auto value = parse_enum<E>(text)) {
    out = *value;
    return Status::success();
  }
  return make_error(ErrorCode::invalid_argument, std::string(option) + " '" + text.substr(0, 40) + "' is not one of: " + enum_choices<E>());
}

}  // namespace tessera::cli

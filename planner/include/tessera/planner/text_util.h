// Small text helpers shared by the planner's readers and reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/planner/status.h"

namespace tessera::planner {

// Replaces control characters by spaces and cuts to max_chars, so that an error
// message built from user input stays one printable line.
std::string one_line(std::string_view text, size_t max_chars);

// Shortest decimal text for a double (0.5, 1e-05, 32).
std::string format_number(double value);

// Reads a whole file; errors name `field` (the option that gave the path).
Result<std::string> read_text_file(const std::string& path, const std::string& field);

}  // namespace tessera::planner

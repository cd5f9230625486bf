// Small text helpers shared by the planner's readers and reports.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/planner/status.h"

namespace tessera::planner {

// The most a JSON input (config.json, plan.json, metrics.json, a session) may
// hold: a config.json is a few KB, and plan.json for llama-2-70b on 1,024 GPUs
// with all its 107 plans is 1.7 MB; anything larger is the wrong file, refused
// before it is read.
inline constexpr size_t kMaxJsonFileBytes = size_t{16} << 20;

// Replaces control characters by spaces and cuts to max_chars, so that an error
// message built from user input stays one printable line.
std::string one_line(std::string_view text, size_t max_chars);

// Shortest decimal text for a double (0.5, 1e-05, 32).
std::string format_number(double value);

// What an st_mode says a path is, for messages: "a directory", "a symbolic
// link", "a character device", "a FIFO", ...
const char* file_type_name(mode_t mode);

// Reads a whole regular file of at most max_bytes. Devices, FIFOs and sockets
// are refused without reading or waiting, and the size is checked before the
// read, so /dev/zero or a pipe cannot stall or exhaust memory. Errors name
// `field` (the option that gave the path).
Result<std::string> read_text_file(const std::string& path, const std::string& field, size_t max_bytes);

}  // namespace tessera::planner

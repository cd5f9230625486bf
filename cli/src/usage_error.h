// The one line a user reads when the command line does not parse: which
// option was not understood, what was probably meant (a near spelling, or the
// command that takes that option), and which command's --help to read.
#pragma once

#include <string>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace tessera::cli {

// `app` is the whole `tessera` application after a failed parse of argv.
std::string usage_error_message(const CLI::App& app, const CLI::ParseError& error, int argc, const char* const* argv);

}  // namespace tessera::cli

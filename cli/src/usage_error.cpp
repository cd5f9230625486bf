#include "usage_error.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <string_view>
#include <vector>

#include "tessera/planner/text_util.h"

namespace tessera::cli {
namespace {

constexpr std::string_view kCommands = "models, gpus, estimate, plan, export, train or compare";

// Levenshtein distance, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "--name" of "--name=value"; "" for a token that is not an option.
std::string option_name(std::string_view token) {
  if (token.size() < 2 || token[0] != '-' || token == "--") return "";
  if (token[1] != '-' && token.size() > 2 && std::isdigit(static_cast<unsigned char>(token[1]))) return "";  // -1: a value
  return std::string(token.substr(0, token.find('=')));
}

std::vector<std::string> long_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

// What the user probably meant by an option `command` does not have.
std::string hint_for(const CLI::App& app, const CLI::App& command, const std::string& unknown) {
  std::string nearest;
  size_t best = 3;  // at most two edits away
  for (const std::string& name : long_names(command)) {
    const size_t distance = edit_distance(unknown, name);
    if (distance < best) best = distance, nearest = name;
  }
  if (!nearest.empty()) return "; did you mean " + nearest + "?";
  std::string owners;
  for (const CLI::App* other : app.get_subcommands(std::function<bool(const CLI::App*)>())) {
    if (other == &command || other->get_option_no_throw(unknown) == nullptr) continue;
    owners += (owners.empty() ? "`tessera " : ", `tessera ") + other->get_name() + "`";
  }
  if (!owners.empty()) return "; it is an option of " + owners + ", not of `tessera " + command.get_name() + "`";
  return "";
}

std::string unexpected_argument(const CLI::App& app, const CLI::App& command, int argc, const char* const* argv) {
  bool after_command = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view token = argv[i];
    if (!after_command) {
      after_command = token == command.get_name();
      continue;
    }
    const std::string name = option_name(token);
    if (name.empty()) continue;
    if (command.get_option_no_throw(name) == nullptr) {
      return "unknown option " + name + " for `tessera " + command.get_name() + "`" + hint_for(app, command, name);
    }
  }
  return "";
}

}  // namespace

std::string usage_error_message(const CLI::App& app, const CLI::ParseError& error, int argc, const char* const* argv) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  // CLI11 says only "A subcommand is required" for `tessera bogus`: name the word.
  if (parsed.empty()) {
    return argc > 1 ? "unknown command or option '" + planner::one_line(argv[1], 60) + "'; use " + std::string(kCommands) + " (see tessera --help)"
                    : "a command is required: " + std::string(kCommands) + " (see tessera --help)";
  }
  const CLI::App& command = *parsed.front();
  std::string message;
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) message = unexpected_argument(app, command, argc, argv);
  if (message.empty()) message = error.what();
  return planner::one_line(message, 300) + " (see tessera " + command.get_name() + " --help)";
}

}  // namespace tessera::cli

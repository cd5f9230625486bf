// Enum <-> name tables: one list per enum, used by the command line, JSON
// reports and the GUI, so a value's spelling is defined once.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tessera {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// Each enum provides `std::span<const EnumName<E>> enum_names(E)` (found by ADL).
template <typename E>
std::string_view enum_name(E value) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.value == value) return entry.name;
  }
  return "unknown";
}

template <typename E>
std::optional<E> parse_enum(std::string_view name) {
  for (const auto& entry : enum_names(E{})) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// "a, b, c": the accepted spellings, for error messages and --help.
template <typename E>
std::string enum_choices() {
  std::string out;
  for (const auto& entry : enum_names(E{})) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

}  // namespace tessera

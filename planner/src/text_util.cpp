#include "tessera/planner/text_util.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera::planner {

std::string one_line(std::string_view text, size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars));
  for (char ch : text) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(ch);
    out += (byte < 0x20 || byte == 0x7f) ? ' ' : ch;
  }
  return out;
}

std::string format_number(double value) {
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

Result<std::string> read_text_file(const std::string& path, const std::string& field) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return make_error(ErrorCode::not_found, field + ": '" + one_line(path, 200) + "' is a directory; give the path of a .json file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(ErrorCode::not_found, field + ": cannot open '" + one_line(path, 200) + "': " + std::strerror(errno));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::io_error, field + ": cannot read '" + one_line(path, 200) + "'");
  return buffer.str();
}

}  // namespace tessera::planner

// The planner's error messages as the window shows them: the command-line
// options they name become the controls' labels ("--seq 4096 exceeds ..." ->
// "Sequence 4096 exceeds ..."), and a JSON parser's exception loses its
// "[json.exception...]" tag and the file text it quotes, on one line.
#pragma once

#include <string_view>

#include <QString>

namespace tessera::gui {

QString error_text(std::string_view message);

}  // namespace tessera::gui

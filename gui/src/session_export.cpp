#include "session_export.h"

#include "await_search.h"
#include "input_panel.h"
#include "main_window.h"
#include "session_io.h"

namespace tessera::gui {

Status export_session(const QString& session_path, const QString& export_path) {
  auto inputs = load_session(session_path.toStdString());
  if (!inputs) return inputs.error();
  MainWindow window(StartState::defaults);
  window.setAttribute(Qt::WA_DontShowOnScreen);  // laid out and drawn, never on screen
  window.resize(1600, 1000);
  window.show();
  window.inputPanel()->setInputs(inputs.value());
  window.session().setInputs(inputs.value());
  if (const auto& error = window.session().inputError()) return make_error(ErrorCode::invalid_argument, session_path.toStdString() + ": " + error->message);
  if (!await_search(window.session(), 120000)) return make_error(ErrorCode::io_error, "the session's plan search did not finish in two minutes");
  if (const auto& error = window.session().inputError()) return make_error(ErrorCode::invalid_argument, session_path.toStdString() + ": " + error->message);
  return window.exportTo(export_path);
}

}  // namespace tessera::gui

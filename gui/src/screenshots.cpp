#include "screenshots.h"

#include <QCoreApplication>
#include <QDir>
#include <QTableView>
#include <QTimer>
#include <optional>

#include "await_search.h"
#include "input_panel.h"
#include "main_window.h"
#include "mesh_view.h"
#include "plan_table_model.h"
#include "session_io.h"

namespace tessera::gui {

namespace {

// The best Gemini plan that puts something on the host (so the map shows both
// places), else the best Gemini plan, else the best plan.
int chunk_example_row(const PlanTableModel& model) {
  int any_gemini = -1;
  for (int row = 0; row < model.rowCount(); ++row) {
    const auto plan = model.planAt(row);
    if (!plan || plan->plugin.kind != planner::PluginKind::gemini) continue;
    if (plan->plugin.gemini.offload_optim_frac > 0 || plan->plugin.gemini.offload_param_frac > 0) return row;
    if (any_gemini < 0) any_gemini = row;
  }
  return std::max(0, any_gemini);
}

}  // namespace

Status write_screenshots(const QString& directory, QSize window_size, const QString& session) {
  std::optional<PlannerInputs> inputs;
  if (!session.isEmpty()) {
    auto loaded = load_session(session.toStdString());
    if (!loaded) return loaded.error();
    inputs = std::move(loaded).value();
  }
  if (!QDir().mkpath(directory)) return make_error(ErrorCode::io_error, "cannot create " + directory.toStdString());
  MainWindow window(StartState::defaults);
  window.resize(window_size);
  window.show();
  // The example is the default inputs; wait for its search (milliseconds; 60 s at most).
  if (!await_search(window.session(), 60000) || !window.session().searchResult()) return make_error(ErrorCode::io_error, "the example's plan search did not finish");
  if (inputs) {
    window.inputPanel()->setInputs(*inputs);
    window.session().setInputs(*inputs);
    if (const auto& error = window.session().inputError()) return make_error(ErrorCode::invalid_argument, session.toStdString() + ": " + error->message);
    if (!await_search(window.session(), 60000) || !window.session().searchResult()) return make_error(ErrorCode::io_error, "the session's plan search did not finish");
  }
  // A rank inside both groups, so every outline shows (the last rank of a smaller plan).
  if (const auto& shown = window.session().shownPlan()) window.meshView()->selectRank(std::min<int64_t>(5, shown->request.layout.world_size() - 1));
  for (View view : kAllViews) {
    window.showView(view);
    // The chunk map of a Gemini plan; the other views show the best plan.
    const int row = view == View::chunks ? chunk_example_row(*window.planModel()) : 0;
    if (const auto plan = window.planModel()->planAt(row)) window.session().selectPlan(*plan);
    QCoreApplication::processEvents();
    const QString path = QDir(directory).filePath(MainWindow::viewName(view) + QStringLiteral(".png"));
    if (!window.grab().save(path, "PNG")) return make_error(ErrorCode::io_error, "cannot write " + path.toStdString());
  }
  window.close();
  return Status::success();
}

}  // namespace tessera::gui

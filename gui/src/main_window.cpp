#include "main_window.h"

#include <QAction>
#include <QComboBox>
#include <QCloseEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMimeData>
#include <QScrollArea>
#include <QSet>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "chunk_map.h"
#include "chunk_view.h"
#include "comparison_model.h"
#include "error_text.h"
#include "input_panel.h"
#include "layout_editor.h"
#include "measured_run_view.h"
#include "memory_timeline_chart.h"
#include "memory_timeline_view.h"
#include "memory_view.h"
#include "menu_shortcuts.h"
#include "mesh_view.h"
#include "pipeline_view.h"
#include "pdf_report.h"
#include "plan_comparison_view.h"
#include "plan_difference_model.h"
#include "plan_table_model.h"
#include "report_contents.h"
#include "report_export.h"
#include "session_io.h"
#include "verdict_label.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/report.h"
#include "tessera/planner/text_util.h"

namespace tessera::gui {

namespace {

QWidget* scrolled(QWidget* view) {
  auto* area = new QScrollArea;
  area->setWidget(view);
  area->setWidgetResizable(true);
  area->setFrameShape(QFrame::NoFrame);
  return area;
}

// Column widths from the text they hold (QHeaderView's own sizing reserves a
// sort arrow in every header, which pushes tokens/s and MFU out of a 1280-pixel window).
void fit_columns(QTableView& table, int last_column) {
  constexpr int kWidest = 120;  // longer cells elide; the tooltip has the plan
  const QFontMetrics cell(table.font()), header(table.horizontalHeader()->font());
  const QAbstractItemModel& model = *table.model();
  for (int column = 0; column < model.columnCount(); ++column) {
    int width = header.horizontalAdvance(model.headerData(column, Qt::Horizontal).toString()) + 18;
    // Each distinct text measured once (a column repeats its plugins, stages and
    // schedules), and none once the column is as wide as it gets: measuring
    // text is most of what refilling the table costs.
    QSet<QString> measured;
    for (int row = 0; row < model.rowCount() && column != last_column && width < kWidest; ++row) {
      const QString text = model.index(row, column).data().toString();
      if (!measured.contains(text)) {
        measured.insert(text);
        width = std::max(width, cell.horizontalAdvance(text) + 12);
      }
    }
    table.setColumnWidth(column, column == last_column ? 900 : std::min(width, kWidest));
  }
}

// What kind of JSON document a file holds, from its "kind" field: "" for a
// JSON object without one (a model config); an error for a file that cannot be
// read or is not a JSON object.
// Whether the file's first character that is not white space opens a JSON
// object, as every document the window opens does (a log's first line may
// open with '[', as torchtitan's "[rank0]:" does); a file that cannot be read,
// or is empty, is taken for JSON, whose reading says why.
bool opens_json_object(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return true;
  QByteArray head = file.read(4096);
  if (head.startsWith("\xEF\xBB\xBF")) head.remove(0, 3);  // a UTF-8 byte order mark
  for (char c : head) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return true;
}

Result<std::string> document_kind(const QString& path) {
  auto text = planner::read_text_file(path.toStdString(), "file", planner::kMaxJsonFileBytes);
  if (!text) return text.error();
  auto doc = planner::parse_json(text.value(), path.toStdString());
  if (!doc) return doc.error();
  if (!doc->is_object()) return make_error(ErrorCode::parse_error, path.toStdString() + ": not a model config, session or metrics.json (expected a JSON object)");
  const auto kind = doc->find("kind");
  return kind != doc->end() && kind->is_string() ? kind->get<std::string>() : std::string();
}

}  // namespace

MainWindow::MainWindow(StartState start, QWidget* parent) : QMainWindow(parent), start_(start) {
  setWindowTitle(tr("Tessera planner"));
  setAcceptDrops(true);
  inputs_ = new InputPanel;
  auto* input_scroll = scrolled(inputs_);
  input_scroll->setMinimumWidth(inputs_->sizeHint().width() + 24);

  QWidget* plans_page = buildPlansPage();
  QWidget* memory_page = buildMemoryPage();
  mesh_view_ = new MeshView;
  pipeline_view_ = new PipelineView;
  chunk_view_ = new ChunkView;
  timeline_view_ = new MemoryTimelineView;
  plan_comparison_view_ = new PlanComparisonView;
  measured_view_ = new MeasuredRunView;

  tabs_ = new QTabWidget;
  tabs_->addTab(plans_page, tr("Plans"));
  tabs_->addTab(memory_page, tr("Memory"));
  tabs_->addTab(mesh_view_, tr("Device mesh"));
  tabs_->addTab(pipeline_view_, tr("Pipeline schedule"));
  tabs_->addTab(chunk_view_, tr("ZeRO / chunks"));
  tabs_->addTab(timeline_view_, tr("Memory over a step"));
  tabs_->addTab(plan_comparison_view_, tr("Compare plans"));
  tabs_->addTab(measured_view_, tr("Measured run"));

  verdict_ = new VerdictLabel;
  problem_ = new QLabel;  // file errors stay here until the next successful open, save or export
  problem_->setWordWrap(true);
  problem_->setTextFormat(Qt::PlainText);
  problem_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  problem_->setStyleSheet(QStringLiteral("color: #B01E1E;"));
  problem_->setVisible(false);
  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(verdict_);
  right_layout->addWidget(problem_);
  right_layout->addWidget(tabs_, 1);

  splitter_ = new QSplitter;
  splitter_->addWidget(input_scroll);
  splitter_->addWidget(right);
  splitter_->setStretchFactor(1, 1);
  splitter_->setChildrenCollapsible(false);
  setCentralWidget(splitter_);
  buildMenus();
  buildStatusBar();
  connectSignals();

  PlannerInputs initial;
  bool geometry_restored = false;
  if (start_ == StartState::remembered) {
    QSettings settings;
    geometry_restored = restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
    splitter_->restoreState(settings.value("window/splitter").toByteArray());
    tabs_->setCurrentIndex(settings.value("window/tab", 0).toInt());
    if (auto saved = session_from_json(settings.value("session/inputs").toString().toStdString(), "saved settings")) initial = saved.value();
  }
  if (!geometry_restored) resize(1280, 800);
  inputs_->setInputs(initial);
  applyInputs(initial);
}

QWidget* MainWindow::buildPlansPage() {
  plan_model_ = new PlanTableModel(this);
  plan_proxy_ = new QSortFilterProxyModel(this);
  plan_proxy_->setSourceModel(plan_model_);
  plan_proxy_->setSortRole(PlanTableModel::kSortRole);
  plan_table_ = new QTableView;
  plan_table_->setModel(plan_proxy_);
  plan_table_->setSortingEnabled(true);
  plan_table_->sortByColumn(PlanTableModel::kRank, Qt::AscendingOrder);
  plan_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  plan_table_->setSelectionMode(QAbstractItemView::SingleSelection);
  plan_table_->verticalHeader()->setVisible(false);
  plan_table_->horizontalHeader()->setStretchLastSection(true);
  plan_table_->setWordWrap(false);
  plan_table_->verticalHeader()->setDefaultSectionSize(plan_table_->fontMetrics().height() + 8);
  // The figures a plan is chosen by come right after its plugin and layout, in view: at 1280
  // pixels the columns that describe it (schedule, ZeRO, offload, recompute, micro-batch) would
  // push step time, tokens/s and MFU off the screen. The model's columns keep their order.
  QHeaderView* plan_header = plan_table_->horizontalHeader();
  int shown_at = PlanTableModel::kLayout + 1;
  for (int column : {PlanTableModel::kMemory, PlanTableModel::kFits, PlanTableModel::kStepTime, PlanTableModel::kTokensPerS, PlanTableModel::kMfu}) {
    plan_header->moveSection(plan_header->visualIndex(column), shown_at++);
  }
  explanation_ = new QLabel;
  explanation_->setWordWrap(true);
  explanation_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout_editor_ = new LayoutEditor;
  auto* page = new QWidget;
  auto* plans_layout = new QVBoxLayout(page);
  plans_layout->addWidget(plan_table_, 1);
  auto* below_table = new QHBoxLayout;
  below_table->addWidget(explanation_, 1);
  below_table->addWidget(layout_editor_);
  plans_layout->addLayout(below_table);
  return page;
}

QWidget* MainWindow::buildMemoryPage() {
  memory_view_ = new MemoryView;
  comparison_model_ = new ComparisonModel(this);
  comparison_table_ = new QTableView;
  comparison_table_->setModel(comparison_model_);
  comparison_table_->verticalHeader()->setVisible(false);
  comparison_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  comparison_box_ = new QGroupBox(tr("Measured run against the prediction of its set-up"));
  auto* comparison_layout = new QVBoxLayout(comparison_box_);
  comparison_layout->addWidget(comparison_table_);
  comparison_box_->setVisible(false);
  auto* page = new QWidget;
  auto* memory_layout = new QVBoxLayout(page);
  memory_layout->addWidget(scrolled(memory_view_), 3);
  memory_layout->addWidget(comparison_box_, 2);
  return page;
}

void MainWindow::buildStatusBar() {
  search_summary_ = new QLabel;
  statusBar()->addPermanentWidget(search_summary_);  // beside passing messages, never replaced by them
  cancel_search_ = new QToolButton;
  cancel_search_->setText(tr("Cancel search"));
  cancel_search_->setToolTip(tr("Stop the search; the table keeps the plans of the last search that finished"));
  cancel_search_->setVisible(false);
  statusBar()->addPermanentWidget(cancel_search_);
  connect(cancel_search_, &QToolButton::clicked, &session_, &PlannerSession::cancelSearch);
  search_progress_timer_ = new QTimer(this);
  search_progress_timer_->setInterval(100);
  connect(search_progress_timer_, &QTimer::timeout, this, &MainWindow::showSearchProgress);
}

void MainWindow::connectSignals() {
  connect(inputs_, &InputPanel::inputsChanged, this, &MainWindow::applyInputs);
  connect(inputs_, &InputPanel::inputsChanged, this, [this] {
    if (problem_source_ == ProblemSource::exporting) clearProblem();  // the export failed for the inputs before this change
  });
  connect(&session_, &PlannerSession::inputsChecked, this, &MainWindow::updateExportAction);
  connect(&session_, &PlannerSession::inputsChecked, this, [this] {
    // A config.json read from a file gets its name and size in the model list.
    const std::string& source = session_.inputs().model;
    if (!session_.hasModel() || session_.model().config.name == source) return;  // a shipped model is named as listed
    const planner::Model& model = session_.model();
    inputs_->describeModel(source, tr("%1 · %2 parameters").arg(QString::fromStdString(model.config.name),
                                                                  QString::fromStdString(planner::format_count(model.parameter_count))));
  });
  connect(&session_, &PlannerSession::shownPlanChanged, this, &MainWindow::updateExportAction);
  connect(&session_, &PlannerSession::inputsChecked, inputs_, &InputPanel::showError);
  connect(&session_, &PlannerSession::inputsChecked, this, &MainWindow::updateVerdict);
  connect(&session_, &PlannerSession::resultsCleared, this, &MainWindow::onResultsCleared);
  connect(&session_, &PlannerSession::shownPlanChanged, this, &MainWindow::onShownPlanChanged);
  connect(&session_, &PlannerSession::searchStarted, this, &MainWindow::onSearchStarted);
  connect(layout_editor_, &LayoutEditor::evaluateRequested, this, [this](const LayoutChoice& choice) {
    const Status s = session_.showLayout(choice);
    layout_editor_->showError(s ? QString() : QString::fromStdString(s.error().message));
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int index) {
    if (static_cast<View>(index) == View::memory_timeline) updateTimelineView();
    if (static_cast<View>(index) == View::chunks) updateChunkView();
    if (static_cast<View>(index) == View::plans) fitPlanColumns();
  });
  connect(&session_, &PlannerSession::searchFinished, this, &MainWindow::onSearchFinished);
  connect(&session_, &PlannerSession::searchCancelled, this, &MainWindow::onSearchCancelled);
  connect(&session_, &PlannerSession::fitLimitsChanged, this, [this] { inputs_->showFitLimits(session_.fitLimits()); });
  connect(&session_, &PlannerSession::measuredChanged, this, &MainWindow::onMeasuredChanged);
  connect(plan_table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
    if (!current.isValid()) return;
    if (auto plan = plan_model_->planAt(plan_proxy_->mapToSource(current).row())) session_.selectPlan(*plan);
  });
}

void MainWindow::buildMenus() {
  auto add = [this](QMenu* menu, const QString& text, const QKeySequence& keys, auto slot) {
    QAction* action = menu->addAction(text);
    action->setShortcut(keys);
    connect(action, &QAction::triggered, this, slot);
    return action;
  };
  QMenu* file = menuBar()->addMenu(tr("&File"));
  add(file, tr("Open model config…"), QKeySequence::Open, [this] { inputs_->browseModel(); });
  add(file, tr("Open measured run (metrics.json, or a run's log)…"), QKeySequence(Qt::CTRL | Qt::Key_M), [this] { openMeasuredRunDialog(); });
  add(file, tr("Close measured run"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_M), [this] { session_.closeMeasuredRun(); });
  file->addSeparator();
  add(file, tr("Open session…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), [this] { openSessionDialog(); });
  add(file, tr("Save session…"), QKeySequence::Save, [this] { saveSessionDialog(); });
  export_action_ = add(file, tr("Export…"), QKeySequence(Qt::CTRL | Qt::Key_E), [this] { exportDialog(); });
  file->addSeparator();
  add(file, tr("Quit"), QKeySequence::Quit, [this] { close(); });
  QMenu* view = menuBar()->addMenu(tr("&View"));
  int key = Qt::Key_1;
  for (View v : kAllViews) {
    add(view, tabs_->tabText(static_cast<int>(v)), QKeySequence(Qt::CTRL | static_cast<Qt::Key>(key++)), [this, v] { showView(v); });
  }
  view->addSeparator();
  QAction* zoom_in = add(view, tr("Zoom in (pipeline)"), QKeySequence::ZoomIn, [this] { pipeline_view_->zoomIn(); });
  // Ctrl+= as well: ZoomIn is Ctrl++, which needs Shift on most layouts.
  zoom_in->setShortcuts(QKeySequence::keyBindings(QKeySequence::ZoomIn) << QKeySequence(Qt::CTRL | Qt::Key_Equal));
  add(view, tr("Zoom out (pipeline)"), QKeySequence::ZoomOut, [this] { pipeline_view_->zoomOut(); });
  add(view, tr("Fit (pipeline)"), QKeySequence(Qt::CTRL | Qt::Key_0), [this] { pipeline_view_->fit(); });
  auto* shortcuts = new MenuShortcuts(this);
  for (QMenu* menu : {file, view}) {
    for (QAction* action : menu->actions()) shortcuts->addAction(action);
  }
  shortcuts->watch(inputs_);
}

void MainWindow::applyInputs(const PlannerInputs& inputs) { session_.setInputs(inputs); }

void MainWindow::onShownPlanChanged() {
  const auto& shown = session_.shownPlan();
  if (!shown) inputs_->showFitLimits(std::nullopt);
  if (!session_.carryNote().isEmpty()) statusBar()->showMessage(session_.carryNote(), 10000);
  if (!shown) {
    memory_view_->clearPlan();
    mesh_view_->clearPlan();
    pipeline_view_->clearPlan();
    chunk_view_->clearChunkMap();
    chunk_view_stale_ = false;
    timeline_view_->clearPlan();
    timeline_view_stale_ = false;
    plan_comparison_view_->setPlans(nullptr, session_.searchResult());
    plan_table_->selectionModel()->clearSelection();
    updateVerdict();
    return;
  }
  memory_view_->setPlan(session_.sharedModel(), shown);
  mesh_view_->setPlan(session_.planRequest().cluster, shown);
  pipeline_view_->setPlan(shown);
  chunk_view_stale_ = true;
  if (currentView() == View::chunks) updateChunkView();
  timeline_view_stale_ = true;
  if (currentView() == View::memory_timeline) updateTimelineView();
  layout_editor_->showLayout(layout_choice_of(shown->request), shown->request.layout.dp, session_.model().config.num_layers);
  layout_editor_->showError(QString());
  plan_comparison_view_->setPlans(shown, session_.searchResult());
  const bool fits = shown->memory.fits();
  // A plan carried over capacity by a what-if change stays in view; the table holds the ones that fit.
  const QString pick = fits ? QString() : tr(" · pick one that fits under Plans");
  verdict_->setVerdict(QString::fromStdString(planner::verdict_line(shown->memory)), QColor(fits ? 0x1B7F3B : 0xB01E1E),
                       QStringLiteral("%1 · %2 tokens/s · MFU %3%%4%5")
                           .arg(QString::fromStdString(planner::describe_plan(shown->request)), QLocale().toString(shown->simulation.tokens_per_s, 'f', 0))
                           .arg(100 * shown->simulation.mfu, 0, 'f', 1)
                           .arg(QString::fromUtf8(planner::mfu_basis(shown->request.training.precision)), pick));
  const int row = plan_model_->rowOf(shown->request);
  if (row >= 0) selectPlanRow(row);
}

void MainWindow::updateVerdict() {
  if (session_.shownPlan()) return;  // onShownPlanChanged wrote it
  const auto& error = session_.inputError();
  if (error) {
    verdict_->setVerdict(tr("No plan: an input is invalid."), QColor(0xB01E1E), error_text(error->message));
  } else if (session_.searching()) {
    verdict_->setPlainText(tr("Searching plans…"));
  } else {
    verdict_->clear();
  }
}

QString MainWindow::verdictText() const { return verdict_->text(); }

void MainWindow::updateTimelineView() {
  if (!timeline_view_stale_ || !session_.shownPlan()) return;
  timeline_view_->setPlan(session_.shownPlan(), session_.memoryTimeline());
  timeline_view_stale_ = false;
}

void MainWindow::updateChunkView() {
  if (!chunk_view_stale_ || !session_.shownPlan()) return;
  chunk_view_->setChunkMap(make_chunk_map(session_.model(), *session_.shownPlan()));
  chunk_view_stale_ = false;
}

void MainWindow::fitPlanColumns() {
  if (!plan_columns_stale_ || currentView() != View::plans) return;
  fit_columns(*plan_table_, PlanTableModel::kReason);
  plan_columns_stale_ = false;
}

void MainWindow::onSearchStarted() {
  search_summary_->setText(tr("Searching plans…"));
  if (!session_.shownPlan()) updateVerdict();
  // Most searches end in milliseconds; a long one shows its count and the cancel button after the first tick.
  search_progress_timer_->start();
}

void MainWindow::showSearchProgress() {
  if (!session_.searching()) return hideSearchProgress();
  const auto [done, candidates] = session_.searchProgress();
  const QLocale locale;
  search_summary_->setText(tr("Searching plans… %1 of %2 candidates").arg(locale.toString(static_cast<qlonglong>(done)), locale.toString(static_cast<qlonglong>(candidates))));
  cancel_search_->setVisible(true);
}

void MainWindow::hideSearchProgress() {
  search_progress_timer_->stop();
  cancel_search_->setVisible(false);
}

void MainWindow::onSearchCancelled() {
  hideSearchProgress();
  const auto [done, candidates] = session_.searchProgress();
  const QLocale locale;
  search_summary_->setText(session_.searchResult()
                               ? tr("Search cancelled at %1 of %2 candidates: the table keeps the plans of the last search that finished, for earlier inputs")
                                     .arg(locale.toString(static_cast<qlonglong>(done)), locale.toString(static_cast<qlonglong>(candidates)))
                               : tr("Search cancelled at %1 of %2 candidates").arg(locale.toString(static_cast<qlonglong>(done)), locale.toString(static_cast<qlonglong>(candidates))));
  updateVerdict();
}

void MainWindow::onResultsCleared() {
  hideSearchProgress();
  plan_model_->setResult(nullptr, 0);
  plan_comparison_view_->setPlans(session_.shownPlan(), nullptr);
  explanation_->clear();
  search_summary_->clear();
}

void MainWindow::onSearchFinished() {
  hideSearchProgress();
  const auto& result = session_.searchResult();
  plan_model_->setResult(result, session_.planRequest().cluster.gpu.memory_bytes);
  plan_columns_stale_ = true;
  fitPlanColumns();
  plan_comparison_view_->setPlans(session_.shownPlan(), result);
  QString text = QString::fromStdString(result->explanation);
  for (const std::string& s : result->suggestions) text += QStringLiteral("\n• ") + QString::fromStdString(s);
  explanation_->setText(text);
  if (const auto& shown = session_.shownPlan()) {
    const int row = plan_model_->rowOf(shown->request);
    if (row >= 0) selectPlanRow(row);
  }
  search_summary_->setText(tr("Searched %1 candidates in %2 ms: %3 fit, %4 distinct plans")
                               .arg(result->candidates_evaluated)
                               .arg(session_.lastSearchSeconds() * 1000, 0, 'f', 1)
                               .arg(result->candidates_fitting)
                               .arg(result->plans.size()));
}

void MainWindow::onMeasuredChanged() {
  const auto& measured = session_.measured();
  comparison_box_->setVisible(measured.has_value());
  comparison_model_->setRanks(measured ? measured->ranks : std::vector<planner::RankComparison>{});
  comparison_table_->setColumnHidden(ComparisonModel::kRank, comparison_model_->rankCount() <= 1);
  const auto first_rank = measured ? std::optional<MemoryBreakdown>(measured->run.ranks.front().memory) : std::nullopt;
  memory_view_->setMeasured(first_rank);
  timeline_view_->setMeasured(first_rank);
  if (const auto& logged = session_.loggedRun()) {
    measured_view_->setLoggedRun(*logged);
  } else {
    measured_view_->setRun(measured, session_.shownPlan());
  }
  if (measured) {
    const QString ranks = measured->ranks.size() > 1 ? tr(" (%1 ranks)").arg(measured->ranks.size()) : QString();
    comparison_box_->setTitle(tr("Measured run %1%2 against the prediction of its set-up").arg(QFileInfo(measured->path).fileName(), ranks));
  }
}

void MainWindow::selectPlanRow(int source_row) {
  const QModelIndex index = plan_proxy_->mapFromSource(plan_model_->index(source_row, 0));
  if (!index.isValid() || plan_table_->currentIndex().row() == index.row()) return;
  const QSignalBlocker blocker(plan_table_->selectionModel());  // showing the row must not re-select the plan
  plan_table_->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  plan_table_->viewport()->update();
}

void MainWindow::showView(View view) { tabs_->setCurrentIndex(static_cast<int>(view)); }

View MainWindow::currentView() const { return static_cast<View>(tabs_->currentIndex()); }

QWidget* MainWindow::viewWidget(View view) const { return tabs_->widget(static_cast<int>(view)); }

QString MainWindow::viewName(View view) {
  switch (view) {
    case View::plans: return QStringLiteral("plans");
    case View::memory: return QStringLiteral("memory");
    case View::mesh: return QStringLiteral("mesh");
    case View::pipeline: return QStringLiteral("pipeline");
    case View::chunks: return QStringLiteral("chunks");
    case View::memory_timeline: return QStringLiteral("memory-timeline");
    case View::compare: return QStringLiteral("compare");
    case View::measured: return QStringLiteral("measured");
  }
  return {};
}

void MainWindow::openPath(const QString& path) {
  if (!opens_json_object(path)) {
    // A run's log (Megatron-LM, DeepSpeed, torchtitan), read against the plan in view.
    if (const Status s = session_.openRunLog(path); !s) return reportError(QString::fromStdString(s.error().message));
    clearProblem();
    return showView(View::measured);
  }
  const auto kind = document_kind(path);
  if (!kind) return reportError(QString::fromStdString(kind.error().message));
  if (kind.value() == "metrics") {
    const Status s = session_.openMeasuredRun(path);
    inputs_->setInputs(session_.inputs());  // the run's set-up, or what was there before when the run cannot be opened
    if (!s) return reportError(QString::fromStdString(s.error().message));
    clearProblem();
    showView(View::memory);
  } else if (kind.value() == "tessera-gui-session") {
    auto inputs = load_session(path.toStdString());
    if (!inputs) return reportError(QString::fromStdString(inputs.error().message));
    clearProblem();
    inputs_->setInputs(inputs.value());
    applyInputs(inputs.value());
  } else if (!kind.value().empty()) {
    reportError(tr("%1: a \"%2\" file is not a model config, session or metrics.json").arg(path, QString::fromStdString(kind.value())));
  } else {
    clearProblem();
    PlannerInputs in = inputs_->inputs();
    in.model = path.toStdString();
    inputs_->setInputs(in);
    applyInputs(in);  // a file that is not a config shows its error next to the model control
  }
}

Status MainWindow::exportTo(const QString& path) {
  const auto format = export_format_of(path);
  if (!format) return make_error(ErrorCode::invalid_argument, "unknown export format: use .pdf, .svg, .png, .json, .csv, .md or .html");
  if (const auto& error = session_.inputError()) {
    return make_error(ErrorCode::invalid_argument, "nothing exported: an input is invalid (" + error->message + "); fix it first");
  }
  const ExportedView view{tabs_->tabText(tabs_->currentIndex()), printedPart(currentView())};
  switch (*format) {
    case ExportFormat::pdf: return exportPdfReport(path);
    case ExportFormat::svg: return export_view_svg(view, path);
    case ExportFormat::png: return export_view_png(view, path);
    default: return export_planner_report(session_, *format, path);
  }
}

QWidget* MainWindow::printedPart(View view) const {
  switch (view) {
    case View::memory: return memory_view_;
    case View::mesh: return mesh_view_->canvas();
    case View::pipeline: return pipeline_view_->canvas();
    case View::memory_timeline: return timeline_view_->chart();
    case View::plans:
    case View::chunks:
    case View::compare:
    case View::measured: break;
  }
  return viewWidget(view);
}

Status MainWindow::exportPdfReport(const QString& path) {
  auto contents = report_contents(session_);
  if (!contents) return contents.error();
  std::vector<PrintedPage> pages;
  using Plans = PlanTableModel;
  const int fitting = session_.searchResult() ? static_cast<int>(session_.searchResult()->plans.size()) : 0;
  pages.push_back(printed_table(tr("Every plan that fits, fastest first (%1)").arg(fitting), *plan_model_,
                                {Plans::kRank, Plans::kPlugin, Plans::kLayout, Plans::kSchedule, Plans::kZeroStage, Plans::kOffload, Plans::kRecompute,
                                 Plans::kMicroBatch, Plans::kMemory, Plans::kStepTime, Plans::kTokensPerS, Plans::kMfu},
                                [fitting](int row) { return row < fitting; }));  // the plans come first, the rejections after them
  // Views drawn at one width, each as tall as it needs: the same report from any window size.
  constexpr int kPrintWidth = 1200;
  updateTimelineView();
  updateChunkView();
  // The memory view's scroll area holds it to the tab's width whatever it is given: a copy is printed.
  MemoryView memory;
  memory.setPlan(session_.sharedModel(), session_.shownPlan());
  memory.setMeasured(memory_view_->measured());
  std::vector<std::pair<QWidget*, QSize>> resized;
  for (View v : {View::memory, View::memory_timeline, View::pipeline, View::mesh, View::chunks}) {
    QWidget* part = v == View::memory ? &memory : printedPart(v);
    const int height = std::max({part->hasHeightForWidth() ? part->heightForWidth(kPrintWidth) : 0, part->minimumSizeHint().height(), kPrintWidth * 9 / 16});
    resized.push_back({part, part->size()});
    part->resize(kPrintWidth, height);
    pages.push_back(PrintedView{tabs_->tabText(static_cast<int>(v)), part});
  }
  plan_comparison_view_->updateChoices();
  pages.push_back(printed_table(tr("Compare plans · A: %1 · B: %2").arg(plan_comparison_view_->planA()->currentText(), plan_comparison_view_->planB()->currentText()),
                                *plan_comparison_view_->differenceModel(),
                                {PlanDifferenceModel::kQuantity, PlanDifferenceModel::kPlanA, PlanDifferenceModel::kPlanB, PlanDifferenceModel::kDifference}));
  if (session_.measured()) {
    resized.push_back({measured_view_, measured_view_->size()});
    measured_view_->resize(kPrintWidth, kPrintWidth * 9 / 16);
    measured_view_->layout()->activate();
    pages.push_back(PrintedView{tabs_->tabText(static_cast<int>(View::measured)), measured_view_});
  }
  const Status written = write_pdf_report(contents.value(), pages, path);
  for (const auto& [part, size] : resized) part->resize(size);  // their layouts' sizes again
  return written;
}

void MainWindow::reportError(const QString& message, ProblemSource source) {
  problem_->setText(error_text(message.toStdString()));
  problem_->setVisible(true);
  problem_source_ = source;
}

void MainWindow::updateExportAction() {
  const bool exportable = !session_.inputError() && session_.shownPlan();
  export_action_->setEnabled(exportable);
  export_action_->setToolTip(exportable ? QString() : tr("Nothing to export: fix the input marked in red, or wait for the search"));
}

QString MainWindow::searchSummaryText() const { return search_summary_->text(); }

void MainWindow::clearProblem() {
  problem_->clear();
  problem_->setVisible(false);
}

QString MainWindow::problemText() const { return problem_->text(); }

void MainWindow::openMeasuredRunDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a measured run"), QString(),
                                                    tr("metrics.json of tessera train (*.json);;Megatron-LM, DeepSpeed or torchtitan log, "
                                                       "against the plan in view (*.log *.txt *.out);;All files (*)"));
  if (!path.isEmpty()) openPath(path);
}

void MainWindow::openSessionDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a session"), QString(), tr("Session (*.json)"));
  if (!path.isEmpty()) openPath(path);
}

void MainWindow::saveSessionDialog() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save the session"), QStringLiteral("session.json"), tr("Session (*.json)"));
  if (path.isEmpty()) return;
  if (Status s = save_session(path.toStdString(), session_.inputs()); !s) return reportError(QString::fromStdString(s.error().message));
  clearProblem();
  statusBar()->showMessage(tr("Saved %1").arg(path), 5000);
}

void MainWindow::exportDialog() {
  QString filter;
  const QString path = QFileDialog::getSaveFileName(this, tr("Export"), QStringLiteral("tessera-plan.pdf"), export_file_filter(), &filter);
  if (!path.isEmpty()) exportFile(with_export_suffix(path, filter));
}

void MainWindow::exportFile(const QString& path) {
  if (Status s = exportTo(path); !s) return reportError(QString::fromStdString(s.error().message), ProblemSource::exporting);
  clearProblem();
  statusBar()->showMessage(tr("Exported %1").arg(path), 5000);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (start_ == StartState::remembered) {
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    settings.setValue("window/splitter", splitter_->saveState());
    settings.setValue("window/tab", tabs_->currentIndex());
    settings.setValue("session/inputs", QString::fromStdString(session_to_json(session_.inputs())));
  }
  event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  for (const QUrl& url : event->mimeData()->urls()) {
    if (url.isLocalFile()) openPath(url.toLocalFile());
  }
  event->acceptProposedAction();
}

}  // namespace tessera::gui

// The main window: inputs on the left, the views in tabs on the right,
// a verdict line above them, menus with shortcuts, drag and drop of
// config.json / metrics.json / session files, and the window's state kept in QSettings.
#pragma once

#include <QMainWindow>

#include "planner_session.h"

class QAction;
class QLabel;
class QSortFilterProxyModel;
class QSplitter;
class QTabWidget;
class QTableView;
class QGroupBox;
class QTimer;
class QToolButton;

namespace tessera::gui {

class ChunkView;
class ComparisonModel;
class InputPanel;
class LayoutEditor;
class MeasuredRunView;
class MemoryTimelineView;
class MemoryView;
class MeshView;
class PlanComparisonView;
class PipelineView;
class PlanTableModel;
class VerdictLabel;

// In tab order; the newer views come last, so that Ctrl+1..5 keep their views.
enum class View { plans, memory, mesh, pipeline, chunks, memory_timeline, compare, measured };
inline constexpr View kAllViews[] = {View::plans,  View::memory,          View::mesh,    View::pipeline,
                                     View::chunks, View::memory_timeline, View::compare, View::measured};

// Whether the window starts from the geometry and inputs of the last run
// (QSettings) or from the defaults (screenshots, tests).
enum class StartState { remembered, defaults };

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(StartState start = StartState::remembered, QWidget* parent = nullptr);

  PlannerSession& session() { return session_; }
  InputPanel* inputPanel() const { return inputs_; }
  PlanTableModel* planModel() const { return plan_model_; }
  QTableView* planTable() const { return plan_table_; }
  MemoryView* memoryView() const { return memory_view_; }
  MeshView* meshView() const { return mesh_view_; }
  PipelineView* pipelineView() const { return pipeline_view_; }
  ChunkView* chunkView() const { return chunk_view_; }
  MemoryTimelineView* memoryTimelineView() const { return timeline_view_; }
  PlanComparisonView* planComparisonView() const { return plan_comparison_view_; }
  MeasuredRunView* measuredRunView() const { return measured_view_; }
  LayoutEditor* layoutEditor() const { return layout_editor_; }
  ComparisonModel* comparisonModel() const { return comparison_model_; }
  QTableView* comparisonTable() const { return comparison_table_; }
  // File → Export: enabled only while there is a plan to export.
  QAction* exportAction() const { return export_action_; }

  void showView(View view);
  View currentView() const;
  QWidget* viewWidget(View view) const;
  // The part of a view an export draws (SVG, PNG, the PDF report): the drawing without
  // the controls, hints and scroll bars around it; the whole tab where it has none.
  QWidget* printedPart(View view) const;
  static QString viewName(View view);  // "plans", "memory", "mesh", "pipeline", "chunks", "memory-timeline", "compare", "measured"
  // Selects the table row showing `plan` (or the first row matching none).
  void selectPlanRow(int source_row);

  // Opens a dropped or chosen file by what it holds: a session, a measured run (metrics.json),
  // a model config, or anything not JSON as a run's log against the plan in view.
  void openPath(const QString& path);
  // Writes the report (PDF: inputs, verdict, assumptions, every plan, every view), the current
  // view (SVG, PNG) or a planner report, by the suffix.
  // Refused while an input is invalid: there is no plan for those inputs.
  Status exportTo(const QString& path);
  // exportTo as the Export dialog runs it: a failure shows above the views until the inputs
  // change or an export succeeds, a success in the status bar.
  void exportFile(const QString& path);
  // The last file error (open, save, export), shown above the views; empty when none.
  QString problemText() const;
  QString verdictText() const;
  // The last search's summary, kept in the status bar beside passing messages; while a
  // search runs, its progress ("Searching plans… 1,234 of 5,678 candidates").
  QString searchSummaryText() const;
  // The status bar's button that cancels a running search; shown only while one runs.
  QToolButton* cancelSearchButton() const { return cancel_search_; }

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void buildMenus();
  QWidget* buildPlansPage();   // the ranked plans, the search's explanation and the layout editor
  QWidget* buildMemoryPage();  // the memory bars and a measured run's table
  void buildStatusBar();       // the search's summary or progress, and its cancel button
  void connectSignals();
  void applyInputs(const PlannerInputs& inputs);
  void onShownPlanChanged();
  void onSearchFinished();
  void onResultsCleared();
  void onSearchStarted();
  // The memory-over-a-step view gets the shown plan's timeline when it is current
  // (or printed): computing it on every control change would cost a fraction of a millisecond each.
  void updateTimelineView();
  // The chunk view likewise: Gemini's map of a plan's chunks (make_chunk_map) costs a tenth of a millisecond.
  void updateChunkView();
  // The plan table's columns are fitted to a new ranking when the Plans tab is current
  // (or once it becomes so): measuring its texts costs milliseconds on every search.
  void fitPlanColumns();
  void showSearchProgress();
  void onSearchCancelled();
  void hideSearchProgress();
  void updateVerdict();
  void clearProblem();
  void onMeasuredChanged();
  // Where a problem came from: a file's stays until the next good file; an export's until the inputs change.
  enum class ProblemSource { file, exporting };
  void reportError(const QString& message, ProblemSource source = ProblemSource::file);
  void updateExportAction();
  void openMeasuredRunDialog();
  void openSessionDialog();
  void saveSessionDialog();
  void exportDialog();
  Status exportPdfReport(const QString& path);

  PlannerSession session_;
  InputPanel* inputs_ = nullptr;
  VerdictLabel* verdict_ = nullptr;
  QLabel* problem_ = nullptr;
  ProblemSource problem_source_ = ProblemSource::file;
  QLabel* search_summary_ = nullptr;
  QToolButton* cancel_search_ = nullptr;
  QTimer* search_progress_timer_ = nullptr;
  QAction* export_action_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QSplitter* splitter_ = nullptr;
  PlanTableModel* plan_model_ = nullptr;
  QSortFilterProxyModel* plan_proxy_ = nullptr;
  QTableView* plan_table_ = nullptr;
  QLabel* explanation_ = nullptr;
  LayoutEditor* layout_editor_ = nullptr;
  MemoryView* memory_view_ = nullptr;
  QGroupBox* comparison_box_ = nullptr;
  ComparisonModel* comparison_model_ = nullptr;
  QTableView* comparison_table_ = nullptr;
  MeshView* mesh_view_ = nullptr;
  PipelineView* pipeline_view_ = nullptr;
  ChunkView* chunk_view_ = nullptr;
  MemoryTimelineView* timeline_view_ = nullptr;
  PlanComparisonView* plan_comparison_view_ = nullptr;
  MeasuredRunView* measured_view_ = nullptr;
  bool timeline_view_stale_ = false;
  bool chunk_view_stale_ = false;
  bool plan_columns_stale_ = false;
  StartState start_;
};

}  // namespace tessera::gui

// The main window under the offscreen platform: inputs reach the views with
// the planner's numbers, invalid inputs are shown next to their control, the
// measured-run overlay shows the right errors, every export writes a valid
// file, sessions round-trip, and the latency of a change stays bounded.
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include "comparison_model.h"
#include "gui_test_util.h"
#include "input_panel.h"
#include "memory_view.h"
#include "mesh_view.h"
#include "pipeline_view.h"
#include "plan_table_model.h"
#include "session_io.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/rank_groups.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

using nlohmann::json;

namespace {

QByteArray read_all(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// A metrics.json as `tessera train` writes it, for tiny-gpt2 on the CPU, whose
// activations measure 80% of the prediction and everything else as predicted.
std::string metrics_json(const planner::Model& model, const planner::EstimateRequest& request, const MemoryBreakdown& predicted) {
  json categories = json::object();
  for (MemoryCategory c : kAllMemoryCategories) {
    const int64_t device = c == MemoryCategory::activations ? predicted[c].device * 8 / 10 : predicted[c].device;
    categories[std::string(to_string(c))] = json{{"device_bytes", device}, {"host_bytes", 0}};
  }
  json doc{{"schema", 1}, {"kind", "metrics"}, {"device", "cpu"}, {"model", planner::model_to_json(model)}};
  doc.update(planner::request_to_json(request));
  doc["ranks"] = json::array({json{{"ranks", json::array({0, 0})}, {"categories", categories}}});
  doc["tokens_per_s"] = 1000.0;
  return doc.dump(2);
}

}  // namespace

class WindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void changingAnInputUpdatesTableAndCharts() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    window.inputPanel()->seqBox()->setValue(2048);
    // The memory view follows at once, before the new search ends: the planner's estimate of the shown plan.
    const auto& shown = window.session().shownPlan();
    QVERIFY(shown.has_value());
    QCOMPARE(shown->request.training.seq_len, int64_t{2048});
    const auto expected = planner::estimate_memory(window.session().model(), window.session().planRequest().cluster.gpu, shown->request);
    QVERIFY(expected.ok());
    QCOMPARE(window.memoryView()->rows().size(), expected->ranks.size());
    for (size_t i = 0; i < expected->ranks.size(); ++i) QCOMPARE(window.memoryView()->rows()[i].device_total, expected->ranks[i].device_total);
    // The table follows when the search ends: the planner's ranking for these inputs.
    QVERIFY(test::wait_for_search(window.session()));
    PlannerInputs inputs;
    inputs.seq_len = 2048;
    const planner::PlanSearchResult result = test::planner_search(inputs);
    QCOMPARE(window.planModel()->rowCount(), static_cast<int>(result.plans.size() + result.rejected.size()));
    QCOMPARE(window.planModel()->index(0, PlanTableModel::kTokensPerS).data(PlanTableModel::kSortRole).toDouble(),
             result.plans.front().simulation.tokens_per_s);
  }

  void invalidInputIsShownNextToItsControl() {
    MainWindow window(StartState::defaults);
    PlannerInputs inputs;
    inputs.model = "gpt2";  // 1024 learned positions
    inputs.seq_len = 4096;
    window.inputPanel()->setInputs(inputs);
    window.session().setInputs(inputs);
    QVERIFY(window.inputPanel()->errorText(InputField::seq_len).contains("--seq 4096"));
    QVERIFY(window.inputPanel()->errorText(InputField::model).isEmpty());
    window.inputPanel()->seqBox()->setValue(1024);
    QVERIFY(window.inputPanel()->errorText(InputField::seq_len).isEmpty());
    inputs.model = "/nonexistent/config.json";
    window.session().setInputs(inputs);
    QVERIFY(!window.inputPanel()->errorText(InputField::model).isEmpty());
  }

  void measuredRunOverlayShowsTheErrors() {
    auto model = planner::load_model("tiny-gpt2");
    QVERIFY(model.ok());
    planner::EstimateRequest request;  // what tessera train runs: fp32 on the CPU, no GPU runtime
    request.training.precision = planner::Precision::fp32;
    request.training.micro_batch_size = 4;
    request.training.seq_len = 64;
    request.plugin.gradient_as_bucket_view = true;
    request.assumptions.cuda_context_bytes = 0;
    request.assumptions.allocator_reserve_fraction = 0;
    request.assumptions.cublas_workspace_bytes = 0;
    request.assumptions.nccl_bytes_per_group = 0;
    const auto predicted = planner::estimate_memory(model.value(), planner::load_gpu("h100-80g").value(), request);
    QVERIFY(predicted.ok());
    const MemoryBreakdown& p = predicted->ranks.front().bytes;
    QTemporaryDir dir;
    const QString path = dir.filePath("metrics.json");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::fromStdString(metrics_json(model.value(), request, p)));
    file.close();

    MainWindow window(StartState::defaults);
    window.openPath(path);
    QVERIFY(window.session().measured().has_value());
    const int row = static_cast<int>(MemoryCategory::activations);
    const int64_t measured = p[MemoryCategory::activations].device * 8 / 10;
    const double error = 100.0 * static_cast<double>(p[MemoryCategory::activations].device - measured) / static_cast<double>(measured);
    QCOMPARE(window.comparisonModel()->index(row, ComparisonModel::kError).data(Qt::UserRole).toDouble(), error);
    QCOMPARE(window.comparisonModel()->index(static_cast<int>(MemoryCategory::parameters), ComparisonModel::kError).data().toString(),
             QStringLiteral("0.0%"));
    QVERIFY(window.memoryView()->measured().has_value());
    QCOMPARE((*window.memoryView()->measured())[MemoryCategory::activations].device, measured);
    // The shown plan is the run's own set-up, so its bars are the prediction compared against.
    QCOMPARE(window.memoryView()->rows().front().device_total, predicted->ranks.front().device_total);
  }

  void everyExportWritesAValidFile() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    QTemporaryDir dir;
    for (View view : {View::memory, View::pipeline}) {
      window.showView(view);
      QVERIFY(window.exportTo(dir.filePath(MainWindow::viewName(view) + ".svg")).ok());
      QVERIFY(window.exportTo(dir.filePath(MainWindow::viewName(view) + ".png")).ok());
      QSvgRenderer svg(dir.filePath(MainWindow::viewName(view) + ".svg"));
      QVERIFY(svg.isValid());
      QXmlStreamReader xml(read_all(dir.filePath(MainWindow::viewName(view) + ".svg")));
      while (!xml.atEnd()) xml.readNext();
      QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
      const QImage png(dir.filePath(MainWindow::viewName(view) + ".png"));
      QVERIFY(!png.isNull());
      QCOMPARE(png.size(), window.viewWidget(view)->size());
    }
    QVERIFY(window.exportTo(dir.filePath("plan.pdf")).ok());
    QVERIFY(read_all(dir.filePath("plan.pdf")).startsWith("%PDF-"));
    QVERIFY(read_all(dir.filePath("plan.pdf")).trimmed().endsWith("%%EOF"));

    // plan.json round-trips through the planner's own reader.
    QVERIFY(window.exportTo(dir.filePath("plan.json")).ok());
    auto plan_file = planner::read_plan_file(dir.filePath("plan.json").toStdString());
    QVERIFY2(plan_file.ok(), plan_file.ok() ? "" : plan_file.error().message.c_str());
    const auto& result = *window.session().searchResult();
    QCOMPARE(plan_file->plans.size(), result.plans.size());
    QCOMPARE(planner::describe_plan(plan_file->plans.front()), planner::describe_plan(result.plans.front().request));

    // CSV, Markdown and HTML are the planner's reports of the shown plan, byte for byte.
    const auto& shown = *window.session().shownPlan();
    const planner::EstimateReport facts{window.session().model(), window.session().planRequest().cluster.gpu, shown.request, shown.memory};
    for (auto [suffix, format] : {std::pair{"csv", planner::ReportFormat::csv}, std::pair{"md", planner::ReportFormat::md},
                                  std::pair{"html", planner::ReportFormat::html}}) {
      const QString path = dir.filePath(QStringLiteral("report.") + suffix);
      QVERIFY(window.exportTo(path).ok());
      QCOMPARE(read_all(path).toStdString(), planner::render_estimate(facts, format));
    }
    QVERIFY(!window.exportTo(dir.filePath("report.docx")).ok());
  }

  void sessionRoundTrips() {
    PlannerInputs inputs;
    inputs.model = "llama-2-70b";
    inputs.gpus = 64;
    inputs.seq_len = 2048;
    inputs.precision = planner::Precision::fp16;
    inputs.recompute = planner::RecomputeMode::selective;
    inputs.plugin = planner::PluginKind::hybrid_parallel;
    QTemporaryDir dir;
    const std::string path = dir.filePath("session.json").toStdString();
    QVERIFY(save_session(path, inputs).ok());
    auto loaded = load_session(path);
    QVERIFY(loaded.ok());
    QVERIFY(loaded.value() == inputs);
    QVERIFY(!session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "precision": "fp8"})", "s").ok());
  }

  void meshAndPipelineShowThePlan() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    const auto& layout = window.session().shownPlan()->request.layout;
    window.meshView()->selectRank(5);
    for (planner::MeshAxis axis : {planner::MeshAxis::tensor, planner::MeshAxis::data, planner::MeshAxis::pipeline}) {
      QStringList members;
      for (int64_t r : planner::group_members(layout, 5, axis)) members << QString::number(r);
      QVERIFY(window.meshView()->selectedRankText().contains("{" + members.join(", ")));
    }
    const auto [start, end] = window.pipelineView()->visibleRange();
    QCOMPARE(start, 0.0);
    QVERIFY(end >= window.session().shownPlan()->simulation.step_time_s);
    window.pipelineView()->zoomIn();
    QVERIFY(window.pipelineView()->visibleRange().second - window.pipelineView()->visibleRange().first < end - start);
  }

  // Generous bounds on the issue's targets (50 ms and 1 s); bench/gui_bench measures the real figures.
  void aChangeStaysFastAt70BOn1024Gpus() {
    MainWindow window(StartState::defaults);
    window.show();
    PlannerInputs inputs;
    inputs.model = "llama-2-70b";
    inputs.gpus = 1024;
    inputs.global_batch = 1024;
    window.inputPanel()->setInputs(inputs);
    window.session().setInputs(inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QElapsedTimer timer;
    timer.start();
    window.inputPanel()->seqBox()->setValue(2048);
    window.memoryView()->repaint();
    QVERIFY2(timer.elapsed() < 500, qPrintable(QString::number(timer.elapsed())));
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
    QVERIFY(window.planModel()->rowCount() > 0);
  }

  void windowStateIsRemembered() {
    {
      MainWindow window(StartState::remembered);
      window.show();
      window.resize(1000, 700);
      window.showView(View::pipeline);
      window.close();
    }
    MainWindow again(StartState::remembered);
    QCOMPARE(again.size(), QSize(1000, 700));
    QCOMPARE(again.currentView(), View::pipeline);
  }

  void screenshotModeWritesFivePngsAtTheAskedSize() {
    QTemporaryDir dir;
    QProcess gui;
    gui.start(TESSERA_GUI_BINARY, {"--screenshot", dir.path(), "--size", "1920x1080"});
    QVERIFY(gui.waitForFinished(60000));
    QCOMPARE(gui.exitCode(), 0);
    for (const char* view : {"plans", "memory", "mesh", "pipeline", "chunks"}) {
      const QImage png(dir.filePath(QString::fromLatin1(view) + ".png"));
      QVERIFY2(!png.isNull(), view);
      QCOMPARE(png.size(), QSize(1920, 1080));
    }
    QProcess bad;
    bad.start(TESSERA_GUI_BINARY, {"--screenshot", dir.path(), "--size", "big"});
    QVERIFY(bad.waitForFinished(60000));
    QCOMPARE(bad.exitCode(), 2);
  }
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::WindowTest)
#include "gui_window_test.moc"

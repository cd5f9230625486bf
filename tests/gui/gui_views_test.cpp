// The views added in the window's second pass, under the offscreen platform:
// memory over one step and two plans side by side, with the planner's numbers.
#include <algorithm>
#include <cmath>

#include <QTableWidget>
#include <QCheckBox>
#include <QComboBox>
#include <QPushButton>
#include <QSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QFontInfo>
#include <QLabel>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QToolButton>
#include <QTest>

#include "category_style.h"
#include "chunk_view.h"
#include "gui_test_util.h"
#include "memory_timeline_chart.h"
#include "memory_timeline_view.h"
#include "enum_combo.h"
#include "layout_editor.h"
#include "measured_figures.h"
#include "measured_run_view.h"
#include "memory_formula_inputs.h"
#include "memory_view.h"
#include "pipeline_view.h"
#include "plan_table_model.h"
#include "plan_comparison_view.h"
#include "plan_difference_model.h"
#include "plan_labels.h"
#include "report_contents.h"
#include "series_chart.h"
#include "verdict_label.h"
#include "report_export.h"
#include "tessera/planner/cluster.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/export.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/registry.h"
#include "session_io.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

namespace {

// Llama-2-70B on 64 H100s, global batch 256: a hundred plans fit, more than a page holds.
PlannerInputs report_example() {
  PlannerInputs inputs;
  inputs.model = "llama-2-70b";
  inputs.gpus = 64;
  inputs.global_batch = 256;
  return inputs;
}

// The default example (Llama-2-13B on 16 H100s), searched, in a 1280 × 720 window.
bool show_example(MainWindow& window) {
  window.resize(1280, 720);
  window.show();
  return test::wait_for_search(window.session());
}

// The example's best hybrid plan with tp 2 and two interleaved pipeline
// stages, shown as a user picks it from the table: the tests below
// are about that shape, whichever plan the simulator ranks first.
bool show_tp2_pp2_plan(MainWindow& window) {
  const auto& result = window.session().searchResult();
  if (!result) return false;
  for (const auto& plan : result->plans) {
    const planner::EstimateRequest& r = plan.request;
    if (r.layout.tp == 2 && r.layout.pp == 2 && r.plugin.model_chunks() > 1) {
      window.session().selectPlan(r);
      return window.session().shownPlan() && window.session().shownPlan()->request.layout.tp == 2;
    }
  }
  return false;
}

int run_gui(const QStringList& arguments) {
  QProcess gui;
  gui.start(TESSERA_GUI_BINARY, arguments);
  if (!gui.waitForFinished(120000)) return -1;
  return gui.exitCode();
}

}  // namespace

class ViewsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  // The tightest rank row first; its highest point is the memory estimate's total; every row can be chosen.
  void memoryOverAStepShowsEachRankRowOfThePlan() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    QVERIFY(show_tp2_pp2_plan(window));  // pipeline stages: rows that differ
    window.showView(View::memory_timeline);
    const ShownPlan& shown = *window.session().shownPlan();
    MemoryTimelineView* view = window.memoryTimelineView();
    QCOMPARE(view->rowChoice()->count(), static_cast<int>(shown.memory.ranks.size()));
    const planner::RankMemory& tightest = shown.memory.tightest();
    const auto& timeline = *view->chart()->timeline();
    QCOMPARE(timeline.first_rank, tightest.first_rank);
    QCOMPARE(timeline.points[timeline.peak].bytes.device_total(), tightest.device_total);
    QVERIFY2(view->chart()->peakText().startsWith(QStringLiteral("peak ") + bytes_text(tightest.device_total)), qPrintable(view->chart()->peakText()));
    QCOMPARE(view->rowChoice()->currentText(), QString::fromStdString(planner::row_label(tightest)));
    // Another row: its own timeline and peak.
    const int other = view->rowChoice()->currentIndex() == 0 ? view->rowChoice()->count() - 1 : 0;
    QVERIFY(other != view->rowChoice()->currentIndex());
    view->rowChoice()->setCurrentIndex(other);
    const planner::RankMemory& row = shown.memory.ranks[static_cast<size_t>(other)];
    QCOMPARE(view->chart()->timeline()->first_rank, row.first_rank);
    QCOMPARE(view->chart()->timeline()->points[view->chart()->timeline()->peak].bytes.device_total(), row.device_total);
    QVERIFY(!view->chart()->grab().isNull());  // paints
    // What-if: a longer sequence re-estimates the plan in view, and the timeline follows it.
    PlannerInputs inputs = window.session().inputs();
    inputs.seq_len = 8192;
    test::set_inputs(window, inputs);
    QCOMPARE(view->chart()->timeline()->points[view->chart()->timeline()->peak].bytes.device_total(),
             window.session().shownPlan()->memory.ranks[static_cast<size_t>(other)].device_total);
  }

  // metrics.json holds peaks, not a course over the step: the view says so and draws the peak.
  void memoryOverAStepSaysWhatAMeasuredRunHolds() {
    MemoryTimelineView view;
    QVERIFY(view.measuredNote().isEmpty());
    MemoryBreakdown measured;
    measured.add(MemoryCategory::parameters, MemorySpace::device, int64_t{3} << 30);
    view.setMeasured(measured);
    view.show();
    QVERIFY(view.measuredNote().contains(QStringLiteral("not their course over the step")));
    QVERIFY(view.measuredNote().contains(bytes_text(int64_t{3} << 30)));
    view.setMeasured(std::nullopt);
    QVERIFY(view.measuredNote().isEmpty());
  }

  // Plan A is the plan in view, plan B the best other ranked plan; B − A from the planner's figures.
  void comparePlansSetsThePlanInViewAgainstTheNextBest() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    window.showView(View::compare);
    PlanComparisonView* view = window.planComparisonView();
    const auto& result = *window.session().searchResult();
    const ShownPlan& shown = *window.session().shownPlan();
    QCOMPARE(planner::describe_plan(shown.request), planner::describe_plan(result.plans[0].request));
    QVERIFY(view->planA()->currentText().startsWith(QStringLiteral("the plan in view: ")));
    QCOMPARE(view->planB()->currentText(), QStringLiteral("#2 ") + QString::fromStdString(planner::describe_plan(result.plans[1].request)));
    QCOMPARE(view->planB()->count(), static_cast<int>(result.plans.size()) + 1);
    const PlanDifferenceModel& model = *view->differenceModel();
    const auto difference_of = [&](const QString& quantity) {
      for (int row = 0; row < model.rowCount(); ++row) {
        if (model.index(row, PlanDifferenceModel::kQuantity).data().toString() == quantity) {
          return model.index(row, PlanDifferenceModel::kDifference).data(PlanDifferenceModel::kDifferenceRole).toDouble();
        }
      }
      return std::nan("");
    };
    QCOMPARE(difference_of("step time"), result.plans[1].simulation.step_time_s - shown.simulation.step_time_s);
    // Choosing #3 as plan B compares with it; choosing the plan in view as B as well gives no difference.
    view->planB()->setCurrentIndex(3);
    QCOMPARE(difference_of("tokens/s"), result.plans[2].simulation.tokens_per_s - shown.simulation.tokens_per_s);
    view->planB()->setCurrentIndex(0);
    QCOMPARE(difference_of("device total"), 0.0);
    QCOMPARE(model.index(0, PlanDifferenceModel::kDifference).data().toString(), QString());  // the heading row
  }

  // The chunk map is made when its tab comes to the front (a tenth of a
  // millisecond on every change otherwise): a plan chosen behind it is the one it shows.
  void chunkViewShowsThePlanChosenWhileItWasHidden() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    window.showView(View::memory);
    QVERIFY(show_tp2_pp2_plan(window));
    window.showView(View::chunks);
    const QString expected = QStringLiteral("Not this plan's layout: ") + QString::fromStdString(planner::describe_plan(window.session().shownPlan()->request));
    QVERIFY2(window.chunkView()->headerLines().front().startsWith(expected), qPrintable(window.chunkView()->headerLines().front()));
  }

  // D15: a plan without chunks gets Gemini's map for comparison, and the view says so
  // first, in full, wrapping where the window is narrow rather than cutting the line.
  void chunkViewSaysWhenTheMapIsNotThePlans() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    window.showView(View::chunks);
    const ShownPlan& shown = *window.session().shownPlan();
    QVERIFY(shown.request.plugin.kind != planner::PluginKind::gemini);
    ChunkView* view = window.chunkView();
    const QString first = view->headerLines().front();
    QVERIFY2(first.startsWith(QStringLiteral("Not this plan's layout: ") + QString::fromStdString(planner::describe_plan(shown.request)) +
                              QStringLiteral(" does not use chunks.")),
             qPrintable(first));
    QVERIFY(!view->headerLines().join(' ').contains(QStringLiteral("e+")));  // no 1.472e+04 Mi elements
    view->grab();
    const double wide = view->headerBottom();
    view->resize(560, view->height());
    view->grab();
    QVERIFY2(view->headerBottom() > wide, qPrintable(QStringLiteral("%1 <= %2").arg(view->headerBottom()).arg(wide)));
    // A Gemini plan's own chunks say whose they are.
    for (int row = 0; row < window.planModel()->rowCount(); ++row) {
      const auto plan = window.planModel()->planAt(row);
      if (!plan || plan->plugin.kind != planner::PluginKind::gemini) continue;
      window.session().selectPlan(*plan);
      QVERIFY(view->headerLines().front().startsWith(QStringLiteral("Gemini chunks of ")));
      return;
    }
    QFAIL("the example ranks no Gemini plan");
  }

  // D16: only a pipeline's idle compute is a bubble; a plan without one says nothing of bubbles.
  // D17: each pass's exposed tensor-parallel calls are drawn, and events under a pixel keep their width.
  void pipelineViewNamesBubblesAndDrawsTensorParallelCalls() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    QVERIFY(show_tp2_pp2_plan(window));
    window.showView(View::pipeline);
    PipelineView* view = window.pipelineView();
    const ShownPlan& shown = *window.session().shownPlan();
    QCOMPARE(shown.request.layout.pp, 2);
    QVERIFY(view->summaryText().contains(QStringLiteral("bubble")));
    QVERIFY(view->legendLabels().contains(QStringLiteral("idle compute between passes (pipeline bubble)")));
    // One tensor-parallel event per pass, on the stage's communication lane, inside its pass.
    const auto& events = shown.events();
    int passes = 0, tensor_parallel = 0;
    for (const planner::TraceEvent& e : events) {
      passes += e.micro_batch >= 0;
      if (e.name.rfind("tensor-parallel ", 0) != 0) continue;
      ++tensor_parallel;
      QCOMPARE(e.lane % 2, 1);
      const auto pass = std::find_if(events.begin(), events.end(), [&](const planner::TraceEvent& p) {
        return p.lane == e.lane - 1 && e.name == "tensor-parallel " + p.name;
      });
      QVERIFY(pass != events.end());
      QCOMPARE(e.start_s + e.duration_s, pass->start_s + pass->duration_s);
    }
    QCOMPARE(tensor_parallel, passes);
    // At "Fit" a receive is under a pixel wide, and drawn so.
    view->canvas()->grab();
    const auto recv = std::find_if(events.begin(), events.end(), [](const planner::TraceEvent& e) { return e.name.rfind("recv ", 0) == 0; });
    QVERIFY(recv != events.end());
    const QRectF box = view->eventBox(static_cast<size_t>(recv - events.begin()));
    QVERIFY(!box.isNull());
    QVERIFY2(box.width() < 1, qPrintable(QString::number(box.width())));
    // A plan without a pipeline: no bubble in its summary or legend.
    for (int row = 0; row < window.planModel()->rowCount(); ++row) {
      const auto plan = window.planModel()->planAt(row);
      if (!plan || plan->layout.pp != 1) continue;
      window.session().selectPlan(*plan);
      QVERIFY2(!view->summaryText().contains(QStringLiteral("bubble")), qPrintable(view->summaryText()));
      QVERIFY(view->summaryText().startsWith(QStringLiteral("no pipeline")));
      for (const QString& label : view->legendLabels()) QVERIFY2(!label.contains(QStringLiteral("bubble")), qPrintable(label));
      return;
    }
    QFAIL("the example ranks no plan without a pipeline");
  }

  // The shown plan as `tessera export --plan N` writes it from the window's plan.json: the same bytes, by the same functions.
  void exportsAColossalAiScriptADeepSpeedConfigAndATrace() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    QTemporaryDir dir;
    QVERIFY(window.exportTo(dir.filePath("plan.json")).ok());
    const auto file = planner::read_plan_file(dir.filePath("plan.json").toStdString());
    QVERIFY(file.ok());
    const auto read = [&](const QString& name) {
      QFile exported(dir.filePath(name));
      return exported.open(QIODevice::ReadOnly) ? exported.readAll().toStdString() : std::string();
    };
    // A tp × pp plan, picked from the table as a user would.
    int hybrid_row = -1;
    for (int row = 0; row < window.planModel()->rowCount() && hybrid_row < 0; ++row) {
      const auto plan = window.planModel()->planAt(row);
      if (plan && plan->layout.tp > 1 && plan->layout.pp > 1) hybrid_row = row;
    }
    QVERIFY2(hybrid_row >= 0, "the example ranks no tp × pp plan");
    window.session().selectPlan(*window.planModel()->planAt(hybrid_row));
    const auto in_file = static_cast<size_t>(hybrid_row);
    QVERIFY(window.exportTo(dir.filePath("train.py")).ok());
    QCOMPARE(read("train.py"), planner::export_plan(file.value(), in_file, planner::ExportTarget::colossalai).value());
    QVERIFY(window.exportTo(dir.filePath("step.trace.json")).ok());
    QCOMPARE(read("step.trace.json"), planner::export_plan(file.value(), in_file, planner::ExportTarget::perfetto).value());
    // DeepSpeed cannot run the tp × pp plan in view, and says why; it can a plan without them.
    const Status refused = window.exportTo(dir.filePath("ds_config.json"));
    QVERIFY(!refused.ok());
    QVERIFY2(QString::fromStdString(refused.error().message).contains(QStringLiteral("tensor parallelism")), refused.error().message.c_str());
    for (int row = 0; row < window.planModel()->rowCount(); ++row) {
      const auto plan = window.planModel()->planAt(row);
      if (!plan || plan->layout.tp != 1 || plan->layout.pp != 1 || plan->training.recompute == planner::RecomputeMode::full) continue;
      window.session().selectPlan(*plan);
      QVERIFY(window.exportTo(dir.filePath("ds_config.json")).ok());
      QCOMPARE(read("ds_config.json"), planner::export_plan(file.value(), static_cast<size_t>(row), planner::ExportTarget::deepspeed).value());
      return;
    }
    QFAIL("the example ranks no plan DeepSpeed can run");
  }

  void exportNamesPickTheFormat() {
    QCOMPARE(export_format_of(QStringLiteral("a/step.trace.json")), std::optional(ExportFormat::perfetto));
    QCOMPARE(export_format_of(QStringLiteral("ds_config.json")), std::optional(ExportFormat::deepspeed));
    QCOMPARE(export_format_of(QStringLiteral("run.ds_config.json")), std::optional(ExportFormat::deepspeed));
    QCOMPARE(export_format_of(QStringLiteral("train_megatron.sh")), std::optional(ExportFormat::megatron));
    QCOMPARE(export_format_of(QStringLiteral("llama3_8b.TOML")), std::optional(ExportFormat::torchtitan));
    QCOMPARE(export_format_of(QStringLiteral("train.py")), std::optional(ExportFormat::colossalai));
    QCOMPARE(export_format_of(QStringLiteral("plan.json")), std::optional(ExportFormat::json));
    QCOMPARE(with_export_suffix(QStringLiteral("step"), QStringLiteral("Perfetto trace of one step, the shown plan (*.trace.json)")), QStringLiteral("step.trace.json"));
  }

  // An FP8 plan's speed is read as the CLI says: MFU of the bf16 peak, tokens/s an upper bound.
  void fp8PlansSayHowToReadTheirSpeed() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    PlannerInputs inputs = window.session().inputs();
    inputs.precision = planner::Precision::fp8;
    inputs.runtime = planner::Runtime::megatron;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY2(window.verdictText().contains(QStringLiteral("% of the bf16 peak")), qPrintable(window.verdictText()));
    const auto contents = report_contents(window.session());
    QVERIFY(contents.ok());
    QVERIFY(contents->verdict.contains(QStringLiteral("% of the bf16 peak")));
    QVERIFY(contents->verdict.endsWith(QString::fromUtf8(planner::kFp8ThroughputCaveat)));
  }

  // The memory headroom, as tessera plan --memory-headroom takes it: the ranking and the plan in view leave it free.
  void memoryHeadroomIsLeftFreeByEveryPlan() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    // Without the headroom some plans use more than 80% of their GPUs; with it none does.
    const auto& before = window.session().searchResult()->plans;
    QVERIFY(std::any_of(before.begin(), before.end(), [](const planner::Candidate& plan) {
      const planner::RankMemory& tight = plan.memory.tightest();
      return tight.device_total > tight.gpu_capacity - tight.gpu_capacity / 5;
    }));
    PlannerInputs inputs = window.session().inputs();
    inputs.memory_headroom = "20%";
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QCOMPARE(window.session().planRequest().assumptions.memory_headroom_fraction, 0.2);
    const auto& result = *window.session().searchResult();
    QCOMPARE(result.plans.size(), test::planner_search(inputs).plans.size());
    for (const planner::Candidate& plan : result.plans) {
      const planner::RankMemory& tight = plan.memory.tightest();
      QVERIFY(tight.device_total <= tight.gpu_capacity - tight.gpu_capacity / 5);
    }
    // The plan in view, carried through the change, is held to the headroom too.
    const planner::RankMemory& shown = window.session().shownPlan()->memory.tightest();
    QCOMPARE(shown.headroom, static_cast<int64_t>(0.2 * static_cast<double>(shown.gpu_capacity)));
    // Typed as the CLI takes it; anything else is refused next to the control, by the control's name.
    inputs.memory_headroom = "lots";
    test::set_inputs(window, inputs);
    QVERIFY(window.inputPanel()->errorText(InputField::memory_headroom).startsWith(QStringLiteral("Memory headroom: 'lots' is not a size")));
    // A session keeps it.
    inputs.memory_headroom = "1.5";
    QCOMPARE(session_from_json(session_to_json(inputs), "test").value().memory_headroom, std::string("1.5"));
  }

  // torch.compile, as tessera plan --torch-compile: under the hf profiles the model is timed fused instead of op by op.
  void torchCompileTimesThePlanFusedAndIsKept() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    PlannerInputs inputs = window.session().inputs();
    inputs.activation_profile = planner::ActivationProfile::hf_autocast;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(!window.inputPanel()->torchCompileBox()->isChecked());
    const ShownPlan& eager = *window.session().shownPlan();
    const std::string eager_plan = planner::describe_plan(eager.request);
    const double eager_step = eager.simulation.step_time_s;
    const int64_t eager_bytes = eager.memory.tightest().device_total;
    // Ticking the box keeps the plan in view and times it compiled: faster, the same memory.
    window.inputPanel()->torchCompileBox()->setChecked(true);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.session().planRequest().torch_compile);
    const ShownPlan& compiled = *window.session().shownPlan();
    QVERIFY(compiled.request.training.torch_compile);
    QCOMPARE(planner::describe_plan(compiled.request), eager_plan);
    QVERIFY2(compiled.simulation.step_time_s < eager_step, qPrintable(QString::number(compiled.simulation.step_time_s)));
    QCOMPARE(compiled.memory.tightest().device_total, eager_bytes);
    // The ranking is the planner's own search with --torch-compile.
    inputs.torch_compile = true;
    const planner::PlanSearchResult own = test::planner_search(inputs);
    QCOMPARE(window.session().searchResult()->plans.size(), own.plans.size());
    QCOMPARE(window.session().searchResult()->plans.front().simulation.step_time_s, own.plans.front().simulation.step_time_s);
    // One layout evaluated by hand is timed compiled too.
    window.layoutEditor()->evaluateButton()->click();
    QVERIFY(window.session().shownPlan()->request.training.torch_compile);
    // The report's first page says so beside the profile.
    const auto contents = report_contents(window.session());
    QVERIFY(contents.ok());
    const auto line = std::find_if(contents->inputs.begin(), contents->inputs.end(), [](const auto& l) { return l.first == QStringLiteral("Activation profile"); });
    QVERIFY(line != contents->inputs.end());
    QCOMPARE(line->second, QStringLiteral("hf_autocast · transformers 5.17 · torch.compile"));
    // A session keeps both; one saved before these controls loads as flash, not compiled; a wrong type is refused by name.
    const auto loaded = session_from_json(session_to_json(inputs), "test");
    QVERIFY(loaded.ok());
    QCOMPARE(loaded->activation_profile, planner::ActivationProfile::hf_autocast);
    QVERIFY(loaded->torch_compile);
    const auto old = session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "model": "gpt2"})", "old.json");
    QVERIFY(old.ok());
    QCOMPARE(old->activation_profile, planner::ActivationProfile::flash);
    QVERIFY(!old->torch_compile);
    const auto wrong = session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "torch_compile": "yes"})", "s.json");
    QVERIFY(!wrong.ok());
    QCOMPARE(wrong.error().message, std::string("s.json: \"torch_compile\" must be true or false, got \"yes\""));
  }

  // The runtime, as tessera plan --runtime: the search tries what that runtime runs,
  // the report names it, a session keeps it; a plugin it does not run is refused
  // next to the control. pin_memory, as --pin-memory, reaches the plans.
  void runtimeSearchesThatRuntimesPlansAndIsKept() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    QCOMPARE(window.inputPanel()->runtimeBox()->currentText(), QStringLiteral("colossalai"));
    QVERIFY(window.inputPanel()->pinMemoryBox()->isChecked());
    window.inputPanel()->runtimeBox()->setCurrentIndex(window.inputPanel()->runtimeBox()->findText(QStringLiteral("megatron")));
    QVERIFY(test::wait_for_search(window.session()));
    QCOMPARE(window.session().planRequest().runtime, planner::Runtime::megatron);
    const auto& result = *window.session().searchResult();
    QVERIFY(!result.plans.empty());
    for (const planner::Candidate& plan : result.plans) {
      QCOMPARE(plan.request.plugin.runtime, planner::Runtime::megatron);
      QCOMPARE(plan.request.plugin.kind, planner::PluginKind::hybrid_parallel);
    }
    QCOMPARE(window.session().shownPlan()->request.plugin.runtime, planner::Runtime::megatron);
    PlannerInputs inputs = window.session().inputs();
    QCOMPARE(result.plans.size(), test::planner_search(inputs).plans.size());
    const auto contents = report_contents(window.session());
    QVERIFY(contents.ok());
    const auto line = std::find_if(contents->inputs.begin(), contents->inputs.end(), [](const auto& l) { return l.first == QStringLiteral("Runtime"); });
    QVERIFY(line != contents->inputs.end());
    QCOMPARE(line->second, QStringLiteral("megatron"));
    // The plan in view exports as Megatron-LM's launch script.
    QTemporaryDir dir;
    const QString script = dir.filePath(QStringLiteral("train_megatron.sh"));
    const Status exported = export_planner_report(window.session(), ExportFormat::megatron, script);
    QVERIFY2(exported.ok(), exported.ok() ? "" : exported.error().message.c_str());
    QFile file(script);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QVERIFY(file.readAll().contains("pretrain_gpt.py"));
    // Not as a torchtitan job config: the plan counts Megatron-Core's states, and no file is left.
    const QString job = dir.filePath(QStringLiteral("job.toml"));
    const Status refused = export_planner_report(window.session(), ExportFormat::torchtitan, job);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().message.ends_with("plan again with --runtime torchtitan"), refused.error().message.c_str());
    QVERIFY(!QFile::exists(job));
    // Gemini is ColossalAI's: refused by name beside the runtime.
    inputs.plugin = planner::PluginKind::gemini;
    test::set_inputs(window, inputs);
    QVERIFY2(window.inputPanel()->errorText(InputField::runtime).startsWith(QStringLiteral("Runtime megatron searches hybrid_parallel plans")),
             qPrintable(window.inputPanel()->errorText(InputField::runtime)));
    QVERIFY(window.inputPanel()->errorText(InputField::runtime).endsWith(QStringLiteral("drop Plugin gemini")));
    // pin_memory off under ColossalAI's Gemini: the plans count no pinned chunk copies on the host.
    inputs.runtime = planner::Runtime::colossalai;
    inputs.pin_memory = false;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(!window.inputPanel()->pinMemoryBox()->isChecked());
    QVERIFY(!window.session().shownPlan()->request.plugin.pin_memory);
    // A session keeps both; one saved before them loads as ColossalAI with pinning; a wrong name is refused.
    inputs.runtime = planner::Runtime::deepspeed;
    const auto loaded = session_from_json(session_to_json(inputs), "test");
    QVERIFY(loaded.ok());
    QCOMPARE(loaded->runtime, planner::Runtime::deepspeed);
    QVERIFY(!loaded->pin_memory);
    const auto old = session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "model": "gpt2"})", "old.json");
    QVERIFY(old.ok());
    QCOMPARE(old->runtime, planner::Runtime::colossalai);
    QVERIFY(old->pin_memory);
    const auto wrong = session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "runtime": "megatron-lm"})", "s.json");
    QVERIFY(!wrong.ok());
    QCOMPARE(wrong.error().message,
             std::string("s.json: \"runtime\" must be one of colossalai, megatron, torchtitan, deepspeed, got \"megatron-lm\""));
  }

  // The transformers release, as tessera plan --transformers-version: chosen beside the
  // profile (only the hf profiles read it), in the plan and the report, kept by a session.
  void transformersVersionIsChosenUnderTheHfProfilesAndKept() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    QVERIFY(!window.inputPanel()->transformersBox()->isEnabled());  // flash
    PlannerInputs inputs = window.session().inputs();
    inputs.activation_profile = planner::ActivationProfile::hf;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.inputPanel()->transformersBox()->isEnabled());
    QCOMPARE(window.inputPanel()->transformersBox()->currentData().toString(), QStringLiteral("5.17"));
    inputs.transformers_version = {4, 32};
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QCOMPARE(window.session().planRequest().transformers_version, (planner::TransformersVersion{4, 32}));
    QCOMPARE(window.session().shownPlan()->request.training.transformers_version, (planner::TransformersVersion{4, 32}));
    const auto contents = report_contents(window.session());
    QVERIFY(contents.ok());
    const auto line = std::find_if(contents->inputs.begin(), contents->inputs.end(), [](const auto& l) { return l.first == QStringLiteral("Activation profile"); });
    QVERIFY(line != contents->inputs.end());
    QCOMPARE(line->second, QStringLiteral("hf · transformers 4.32"));
    // A release the planner does not model is refused beside the profile.
    inputs.transformers_version = {4, 40};
    test::set_inputs(window, inputs);
    QVERIFY2(window.inputPanel()->errorText(InputField::activation_profile).contains(QStringLiteral("4.40")),
             qPrintable(window.inputPanel()->errorText(InputField::activation_profile)));
    // A session keeps it; one saved before the control loads as the measured release; a wrong one is refused by name.
    inputs.transformers_version = {4, 32};
    QCOMPARE(session_from_json(session_to_json(inputs), "test").value().transformers_version, (planner::TransformersVersion{4, 32}));
    QCOMPARE(session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "model": "gpt2"})", "old.json").value().transformers_version,
             planner::kMeasuredTransformers);
    QVERIFY(!session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "transformers_version": "latest"})", "s.json").ok());
  }

  // A memory bar's inputs say when torchtitan's eager block and eager loss are what is counted.
  void memoryInputsNameTorchtitansEagerBlockAndLoss() {
    auto model = planner::load_model("llama-3-8b");
    QVERIFY(model.ok());
    const auto gpu = planner::load_gpu("h100-80g");
    QVERIFY(gpu.ok());
    planner::EstimateRequest r;
    r.plugin.kind = planner::PluginKind::torch_fsdp;
    r.plugin.runtime = planner::Runtime::torchtitan;
    r.layout.dp = 8;
    r.training.seq_len = 8192;
    const auto inputs = [&](MemoryCategory category) {
      const auto estimate = planner::estimate_memory(model.value(), gpu.value(), r);
      return estimate.ok() ? formula_inputs(category, estimate->ranks.front(), model.value(), r, estimate.value()) : QString();
    };
    QVERIFY(inputs(MemoryCategory::activations).contains(QStringLiteral("torchtitan's eager block")));
    QVERIFY(inputs(MemoryCategory::logits).contains(QStringLiteral("three tensors")));
    r.training.torch_compile = true;
    QVERIFY(!inputs(MemoryCategory::activations).contains(QStringLiteral("torchtitan's eager block")));
    QVERIFY(!inputs(MemoryCategory::logits).contains(QStringLiteral("three tensors")));
    r.plugin.compile_model_only = true;
    QVERIFY(inputs(MemoryCategory::logits).contains(QStringLiteral("three tensors")));
  }

  // The measured-run dashboard: step time and tokens/s measured against the prediction of
  // the run's set-up (on the CPU it ran on), and its loss and gradient-norm curves.
  void measuredRunDashboardSetsSpeedAgainstThePrediction() {
    auto model = planner::load_model("tiny-gpt2");
    QVERIFY(model.ok());
    const planner::EstimateRequest request = test::cpu_training_request();
    const auto predicted = planner::estimate_memory(model.value(), planner::host_cpu_profile(), request);
    QVERIFY(predicted.ok());
    nlohmann::json doc = nlohmann::json::parse(test::metrics_json(model.value(), request, predicted->ranks.front().bytes));
    doc["loss"] = {5.5, 4.75, 4.25, 4.0};
    doc["grad_norm"] = {2.0, nullptr, 1.5, 1.25};
    doc["step_time_s"] = {0.04, 0.011, 0.010, 0.012};  // the first step warms up
    doc["tokens_per_s"] = 21000.0;
    QTemporaryDir dir;
    QFile file(dir.filePath("metrics.json"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::fromStdString(doc.dump()));
    file.close();
    MainWindow window(StartState::defaults);
    window.resize(1280, 720);
    window.show();
    window.openPath(dir.filePath("metrics.json"));
    QVERIFY(window.session().measured().has_value());
    window.showView(View::measured);
    const planner::StepSimulation& prediction = window.session().shownPlan()->simulation;
    QVERIFY(std::isfinite(prediction.step_time_s) && prediction.step_time_s > 0 && prediction.tokens_per_s > 0);  // the CPU profile simulates
    MeasuredRunView* view = window.measuredRunView();
    QVERIFY2(view->stepTimeText().startsWith(QStringLiteral("measured 11.0 ms · predicted ") + seconds_text(prediction.step_time_s)), qPrintable(view->stepTimeText()));
    const double error = 100 * (prediction.tokens_per_s - 21000.0) / 21000.0;
    QVERIFY2(view->tokensText().endsWith(QString::asprintf("off by %+.1f%%", error)), qPrintable(view->tokensText()));
    QCOMPARE(view->lossChart()->series(), (std::vector<double>{5.5, 4.75, 4.25, 4.0}));
    QVERIFY(std::isnan(view->gradNormChart()->series()[1]));
    QVERIFY(!view->grab().isNull());
    // Closing the run empties the view.
    window.session().closeMeasuredRun();
    QVERIFY(view->stepTimeText().isEmpty());
    QVERIFY(view->lossChart()->series().empty());
  }

  // A torchtitan run's log, opened like any file, is read against the plan in view, as
  // `tessera compare PLAN LOG` reads it: its step time and throughput beside the plan's,
  // and rank 0's reserved peak (torchtitan logs no allocated figure). Another plan closes it.
  void runLogIsReadAgainstThePlanInView() {
    MainWindow window(StartState::defaults);
    window.resize(1280, 720);
    window.show();
    PlannerInputs inputs = window.session().inputs();
    inputs.model = "llama-3-8b";
    inputs.runtime = planner::Runtime::torchtitan;
    inputs.plugin.reset();
    inputs.recompute.reset();
    inputs.gpus = 8;
    inputs.global_batch = 16;
    inputs.seq_len = 8192;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.session().shownPlan() != nullptr);
    QTemporaryDir dir;
    const QString log = dir.filePath(QStringLiteral("torchtitan.log"));
    {
      QFile file(log);
      QVERIFY(file.open(QIODevice::WriteOnly));
      for (const char* tps : {"900", "5,000", "5,100", "4,900"}) {
        file.write(QByteArray("[rank0]:[titan] INFO - step:  5  loss:  9.00000  grad_norm:  1.0000  memory: 50.00GiB(63.17%)  tps: ") + tps +
                   "  tflops: 280.00  mfu: 28.31%\n");
      }
    }
    window.openPath(log);
    QVERIFY2(window.problemText().isEmpty(), qPrintable(window.problemText()));
    QVERIFY(window.session().loggedRun().has_value());
    QCOMPARE(window.currentView(), View::measured);
    MeasuredRunView* view = window.measuredRunView();
    // 16 sequences of 8192 tokens over 8 GPUs at the median of 5,000, 5,100 and 4,900 tokens/s each.
    const double measured_step = 16.0 * 8192 / (5000.0 * 8);
    QVERIFY2(view->stepTimeText().startsWith(QStringLiteral("measured ") + seconds_text(measured_step)), qPrintable(view->stepTimeText()));
    QVERIFY2(view->tokensText().startsWith(QStringLiteral("measured 40,000 tokens/s")), qPrintable(view->tokensText()));
    QVERIFY(view->rankTable()->isVisible());
    QVERIFY(!view->lossChart()->isVisible());
    QVERIFY2(view->tokensText().endsWith(QString::asprintf("off by %+.1f%%", 100 * (window.session().loggedRun()->comparison.predicted_tokens_per_s - 40000) / 40000)),
             qPrintable(view->tokensText()));
    QCOMPARE(view->rankTable()->rowCount(), 1);
    QCOMPARE(view->rankTable()->item(0, 3)->text(), QStringLiteral("-"));  // no allocated figure
    QCOMPARE(view->rankTable()->item(0, 6)->text(), bytes_text(int64_t{50} << 30));
    const int64_t predicted_reserved = window.session().loggedRun()->comparison.memory.front().predicted_reserved;
    QCOMPARE(view->rankTable()->item(0, 5)->text(), bytes_text(predicted_reserved));
    QVERIFY(!view->grab().isNull());
    // Another plan in view: the log was read against the earlier one, so it closes.
    inputs.seq_len = 4096;
    test::set_inputs(window, inputs);
    QVERIFY(!window.session().loggedRun().has_value());
    QVERIFY(view->lossChart()->isVisible());
    // A file that is neither JSON nor a log: one line naming it.
    const QString other = dir.filePath(QStringLiteral("notes.txt"));
    {
      QFile file(other);
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write("hello\n");
    }
    window.openPath(other);
    QVERIFY2(window.problemText().contains(QStringLiteral("notes.txt")), qPrintable(window.problemText()));
    QVERIFY(!window.session().loggedRun().has_value());
  }

  void medianStepLeavesOutTheFirst() {
    QCOMPARE(median_step_time({0.04, 0.011, 0.010, 0.012}), std::optional(0.011));
    QCOMPARE(median_step_time({0.04, 0.011, 0.013}), std::optional(0.012));
    QCOMPARE(median_step_time({0.5}), std::optional(0.5));
    QVERIFY(!median_step_time({}).has_value());
  }

  // A long search can be cancelled: the table keeps the plans of the last search that
  // finished, says they are of earlier inputs, and plan.json is refused until a search finishes.
  void cancellingASearchKeepsThePreviousTable() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    const auto [done, candidates] = window.session().searchProgress();
    QVERIFY(candidates > 0);
    QCOMPARE(done, candidates);
    const auto previous = window.session().searchResult();
    const int rows = window.planModel()->rowCount();
    test::set_inputs(window, test::large_example());
    QVERIFY(window.session().searching());
    window.session().cancelSearch();
    QVERIFY(!window.session().searching());
    QTest::qWait(300);  // the cancelled search, finished or stopped, delivers nothing
    QCOMPARE(window.session().searchResult(), previous);
    QCOMPARE(window.planModel()->rowCount(), rows);
    QVERIFY(window.session().rankingIsStale());
    QVERIFY2(window.searchSummaryText().startsWith(QStringLiteral("Search cancelled at ")), qPrintable(window.searchSummaryText()));
    QVERIFY(!window.cancelSearchButton()->isVisible());
    QTemporaryDir dir;
    const Status refused = window.exportTo(dir.filePath("plan.json"));
    QVERIFY(!refused.ok());
    QVERIFY(QString::fromStdString(refused.error().message).contains(QStringLiteral("earlier inputs")));
    // The next change searches again and the ranking is current once more.
    PlannerInputs inputs = test::large_example();
    inputs.global_batch = 512;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(!window.session().rankingIsStale());
    QVERIFY(window.exportTo(dir.filePath("plan.json")).ok());
  }

  // The verdict line wraps as the rich-text label it replaces did: as many lines at every width.
  void verdictLabelWrapsAsARichTextLabel() {
    const QString lead = QStringLiteral("FITS: every rank leaves at least 9.04 GiB of 79.65 GiB free (tightest: ranks 0-15, 70.60 GiB)");
    const QString rest = QStringLiteral("torch_fsdp full_shard, dp 16, recompute none, micro-batch 2 × 1 · 107,828 tokens/s · MFU 59.4%");
    VerdictLabel verdict;
    verdict.setVerdict(lead, QColor(0x1B7F3B), rest);
    QCOMPARE(verdict.text(), lead + QLatin1Char(' ') + rest);
    QLabel rich(QStringLiteral("<span style='color:#1B7F3B'><b>%1</b></span> %2").arg(lead, rest));
    rich.setTextFormat(Qt::RichText);
    rich.setWordWrap(true);
    for (int width : {300, 600, 900, 1500}) QCOMPARE(verdict.heightForWidth(width), rich.heightForWidth(width));
    verdict.clear();
    QCOMPARE(verdict.heightForWidth(600), 0);
  }

  // FSDP's CPU offload is a layout choice as ZeRO's is: the request keeps it, and the plans' offload column says the shards move.
  void fsdpOffloadIsALayoutChoice() {
    planner::PlanRequest inputs;
    inputs.cluster = planner::make_cluster(planner::load_gpu("h100-80g").value(), 8, 8, 400).value();
    inputs.global_batch_size = 64;
    inputs.seq_len = 1024;
    LayoutChoice choice;
    choice.plugin = planner::PluginKind::torch_fsdp;
    choice.micro_batch = 8;
    choice.cpu_offload = true;
    const auto offloaded = layout_request(choice, planner::EstimateRequest{}, inputs);
    QVERIFY(offloaded.ok());
    QVERIFY(offloaded->plugin.cpu_offload);
    QCOMPARE(offload_of(offloaded.value()), QStringLiteral("shards → host"));
    choice.plugin = planner::PluginKind::torch_ddp;  // nothing sharded to offload
    const auto replicated = layout_request(choice, planner::EstimateRequest{}, inputs);
    QVERIFY(replicated.ok());
    QVERIFY(!replicated->plugin.cpu_offload);
  }

  // Full recompute of some blocks (--recompute-num-layers) is a layout choice: the box
  // is full recompute's only, the request carries the count, and the plans' column names it.
  void recomputedBlocksAreALayoutChoice() {
    LayoutEditor editor;
    LayoutChoice choice;
    choice.recompute = planner::RecomputeMode::full;
    choice.recompute_num_layers = 5;
    editor.showLayout(choice, 8, 32);
    QVERIFY(editor.recomputedBlocksBox()->isEnabled());
    QCOMPARE(editor.layout().recompute_num_layers, int64_t{5});
    planner::PlanRequest inputs;
    inputs.cluster = planner::make_cluster(planner::load_gpu("h100-80g").value(), 8, 8, 400).value();
    inputs.global_batch_size = 64;
    const auto some = layout_request(editor.layout(), planner::EstimateRequest{}, inputs);
    QVERIFY(some.ok());
    QCOMPARE(some->training.recompute_num_layers, int64_t{5});
    QCOMPARE(QString::fromStdString(planner::describe_recompute(some.value())), QStringLiteral("full (5 blocks)"));
    QCOMPARE(layout_choice_of(some.value()), editor.layout());
    choice.recompute = planner::RecomputeMode::none;  // a count left in the box reaches no other mode
    editor.showLayout(choice, 8, 32);
    QVERIFY(!editor.recomputedBlocksBox()->isEnabled());
    QCOMPARE(layout_request(editor.layout(), planner::EstimateRequest{}, inputs)->training.recompute_num_layers, int64_t{0});
  }

  // The model chunks go as far as the planner takes them, the model's layers over pp, past the 64 they once stopped at.
  void modelChunksFollowTheLayersOverPp() {
    LayoutEditor editor;
    LayoutChoice choice;
    choice.pp = 2;
    choice.schedule = planner::PipelineSchedule::interleaved;
    choice.model_chunks = 80;
    editor.showLayout(choice, 1, 160);
    QCOMPARE(editor.modelChunksBox()->maximum(), 80);
    QCOMPARE(editor.layout().model_chunks, 80);
    editor.ppBox()->setValue(4);
    QCOMPARE(editor.modelChunksBox()->maximum(), 40);
    QCOMPARE(editor.layout().model_chunks, 40);
    editor.ppBox()->setValue(200);  // more stages than layers: refused by the planner, one chunk here
    QCOMPARE(editor.modelChunksBox()->maximum(), 1);
  }

  // Direct layout control: exactly one layout evaluated, fitting or not, as tessera estimate does.
  void layoutEditorEvaluatesExactlyOneLayout() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    QVERIFY(show_tp2_pp2_plan(window));
    LayoutEditor* editor = window.layoutEditor();
    const planner::EstimateRequest best = window.session().shownPlan()->request;
    QCOMPARE(editor->layout(), layout_choice_of(best));  // the plan in view: hybrid 4 × 2 × 2, interleaved × 10, ZeRO 1
    QCOMPARE(editor->tpBox()->value(), 2);
    QCOMPARE(editor->modelChunksBox()->value(), 10);  // one block per virtual stage: 40 on 2 stages
    QCOMPARE(editor->modelChunksBox()->maximum(), 20);  // 40 layers over 2 stages: a layer per chunk at most, the planner's bound
    // tp 4 without a pipeline, micro-batch 2: dp 4 and 32 / (4 × 2) = 4 micro-batches.
    editor->ppBox()->setValue(1);
    editor->tpBox()->setValue(4);
    editor->microBatchBox()->setValue(2);
    editor->evaluateButton()->click();
    QVERIFY2(editor->errorText().isEmpty(), qPrintable(editor->errorText()));
    const planner::EstimateRequest& shown = window.session().shownPlan()->request;
    QCOMPARE(shown.layout.dp, 4);
    QCOMPARE(shown.layout.tp, 4);
    QCOMPARE(shown.layout.pp, 1);
    QCOMPARE(shown.training.micro_batch_size, 2);
    QCOMPARE(shown.training.num_micro_batches, 4);
    QCOMPARE(shown.plugin.zero_stage, 1);
    const auto estimate = planner::estimate_memory(window.session().model(), window.session().planRequest().cluster.gpu, shown);
    QVERIFY(estimate.ok());
    QCOMPARE(window.session().shownPlan()->memory.tightest().device_total, estimate->tightest().device_total);
    // DDP of 13B does not fit an 80 GB GPU: it is shown anyway, in red.
    set_combo_enum(editor->pluginBox(), std::optional(planner::PluginKind::torch_ddp));
    editor->tpBox()->setValue(1);
    editor->microBatchBox()->setValue(1);
    editor->evaluateButton()->click();
    QVERIFY(!window.session().shownPlan()->memory.fits());
    QCOMPARE(window.session().shownPlan()->request.plugin.kind, planner::PluginKind::torch_ddp);
    QVERIFY(window.verdictText().contains(QStringLiteral("DOES NOT FIT")));
    // What cannot be evaluated says why, in the window's words, and the plan in view stays.
    editor->tpBox()->setValue(3);
    editor->evaluateButton()->click();
    QCOMPARE(editor->errorText(), QStringLiteral("tp 3 × pp 1 does not divide the 16 GPUs"));
    QCOMPARE(window.session().shownPlan()->request.plugin.kind, planner::PluginKind::torch_ddp);
    set_combo_enum(editor->pluginBox(), std::optional(planner::PluginKind::hybrid_parallel));
    editor->tpBox()->setValue(16);
    editor->evaluateButton()->click();
    QVERIFY2(editor->errorText().startsWith(QStringLiteral("tp 16 does not divide num_attention_heads 40")), qPrintable(editor->errorText()));
    // Context parallelism: cp 2 of the 16 GPUs leaves dp 8.
    editor->tpBox()->setValue(1);
    editor->cpBox()->setValue(2);
    editor->evaluateButton()->click();
    QVERIFY2(editor->errorText().isEmpty(), qPrintable(editor->errorText()));
    QCOMPARE(window.session().shownPlan()->request.layout.cp, 2);
    QCOMPARE(window.session().shownPlan()->request.layout.dp, 8);
    // Hybrid sharding: FSDP as 2 replicas of 8 ranks.
    set_combo_enum(editor->pluginBox(), std::optional(planner::PluginKind::torch_fsdp));
    editor->cpBox()->setValue(1);
    editor->dpReplicateBox()->setValue(2);
    editor->evaluateButton()->click();
    QVERIFY2(editor->errorText().isEmpty(), qPrintable(editor->errorText()));
    QCOMPARE(window.session().shownPlan()->request.layout.dp_replicate, 2);
    QCOMPARE(window.session().shownPlan()->request.layout.shard_ranks(), 8);
    QCOMPARE(layout_choice_of(window.session().shownPlan()->request), editor->layout());
  }

  // D13: an exported SVG names a font family browsers know, at the size the widget laid its text out in.
  void svgNamesAFontBrowsersKnow() {
    MainWindow window(StartState::defaults);
    QVERIFY(show_example(window));
    window.showView(View::memory);
    QTemporaryDir dir;
    QVERIFY(window.exportTo(dir.filePath("memory.svg")).ok());
    QFile file(dir.filePath("memory.svg"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QString svg = QString::fromUtf8(file.readAll());
    const QRegularExpression family(QStringLiteral("font-family=\"([^\"]*)\""));
    int fonts = 0;
    for (auto match = family.globalMatch(svg); match.hasNext(); ++fonts) {
      const QString name = match.next().captured(1);
      QVERIFY2(name.endsWith(QStringLiteral(", sans-serif")) && !name.contains(QStringLiteral("Sans Serif")), qPrintable(name));
    }
    QVERIFY(fonts > 0);
    const int pixels = QFontInfo(window.memoryView()->font()).pixelSize();
    QVERIFY2(svg.contains(QStringLiteral("font-size=\"%1\"").arg(pixels)), qPrintable(QString::number(pixels)));
  }

  // The report's first page: what was asked, of what, and the verdict.
  void reportContentsNameTheInputs() {
    MainWindow window(StartState::defaults);
    test::set_inputs(window, report_example());
    QVERIFY(test::wait_for_search(window.session()));
    const auto contents = report_contents(window.session());
    QVERIFY(contents.ok());
    QCOMPARE(contents->title, QStringLiteral("llama-2-70b on 64 × h100-80g"));
    const auto input = [&](const QString& label) {
      for (const auto& [name, value] : contents->inputs) {
        if (name == label) return value;
      }
      return QString();
    };
    QCOMPARE(input("Model"), QStringLiteral("llama-2-70b · 69.0B parameters (llama-2-70b)"));
    QVERIFY(input("Cluster").startsWith(QStringLiteral("custom: 64 GPUs × h100-80g")));
    QCOMPARE(input("Global batch"), QStringLiteral("256 sequences · 1,048,576 tokens per step"));
    QCOMPARE(input("Sequence"), QStringLiteral("4,096 tokens"));
    QCOMPARE(input("Precision"), QStringLiteral("bf16"));
    QCOMPARE(input("Activation profile"), QStringLiteral("flash"));
    QVERIFY(contents->fits);
    QVERIFY(contents->verdict.startsWith(QStringLiteral("FITS: ")));
    // The planner's assumptions, without the command-line options the window does not have.
    QVERIFY(!contents->assumptions.empty());
    for (const auto& [line, source] : contents->assumptions) QVERIFY2(!source.contains(QStringLiteral("--")), qPrintable(source));
    // Nothing to report while an input is invalid.
    PlannerInputs invalid = report_example();
    invalid.seq_len = 0;
    test::set_inputs(window, invalid);
    QVERIFY(!report_contents(window.session()).ok());
  }

  // The acceptance command: a saved session exported in every format without a
  // window, exit 0; the PDF's text has the model, the GPU count, the global
  // batch and every plan that fits.
  void aSessionExportsFromTheCommandLine() {
    QTemporaryDir dir;
    const QString session = dir.filePath("session.json");
    QVERIFY(save_session(session.toStdString(), report_example()).ok());
    for (const char* name : {"report.pdf", "report.html", "report.svg", "report.png", "report.csv", "report.md", "plan.json"}) {
      QCOMPARE(run_gui({session, "--export", dir.filePath(name)}), 0);
      QVERIFY2(QFileInfo(dir.filePath(name)).size() > 0, name);
    }
    QCOMPARE(run_gui({"--export", dir.filePath("x.pdf")}), 2);                      // no session
    QCOMPARE(run_gui({dir.filePath("absent.json"), "--export", dir.filePath("x.pdf")}), 1);  // a session that cannot be read
    QVERIFY(!QFileInfo::exists(dir.filePath("x.pdf")));
    const QString pdftotext = QStandardPaths::findExecutable("pdftotext");
    if (pdftotext.isEmpty()) QSKIP("pdftotext (poppler-utils) is not installed: the PDF's text is not checked");
    QProcess text;
    text.start(pdftotext, {"-layout", dir.filePath("report.pdf"), "-"});
    QVERIFY(text.waitForFinished(60000));
    const QString pdf = QString::fromUtf8(text.readAllStandardOutput());
    QVERIFY(pdf.contains(QStringLiteral("llama-2-70b")));
    QVERIFY(pdf.contains(QStringLiteral("64 GPUs")));
    QVERIFY(pdf.contains(QStringLiteral("256 sequences")));
    const auto result = test::planner_search(report_example());
    QVERIFY(result.plans.size() > 50);  // more than one page of them
    // One line per plan, "#rank plugin dp×tp×pp ..." in ranked order.
    const QRegularExpression plan_line(QStringLiteral("^(\\d+) +(torch_ddp|torch_fsdp|low_level_zero|gemini|hybrid_parallel) +(\\S+)"),
                                       QRegularExpression::MultilineOption);
    int listed = 0;
    for (auto match = plan_line.globalMatch(pdf); match.hasNext();) {
      const auto m = match.next();
      const planner::EstimateRequest& plan = result.plans[static_cast<size_t>(listed)].request;
      QCOMPARE(m.captured(1).toInt(), listed + 1);
      QCOMPARE(m.captured(2), QString::fromLatin1(enum_name(plan.plugin.kind).data()));
      QVERIFY(m.captured(3).startsWith(QStringLiteral("%1×%2×%3").arg(plan.layout.dp).arg(plan.layout.tp).arg(plan.layout.pp)));
      ++listed;
    }
    QCOMPARE(listed, static_cast<int>(result.plans.size()));
    // No mouse hints in print.
    QVERIFY(!pdf.contains(QStringLiteral("drag")));
  }
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::ViewsTest)
#include "gui_views_test.moc"

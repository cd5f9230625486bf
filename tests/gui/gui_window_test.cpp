// The main window under the offscreen platform: inputs reach the views with
// the planner's numbers, invalid inputs are shown next to their control, the
// measured-run overlay shows the right errors, every export writes a valid
// file, sessions round-trip, and the latency of a change stays bounded.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QGroupBox>
#include <QImage>
#include <QLocale>
#include <QProcess>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QSvgRenderer>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include "category_style.h"
#include "comparison_model.h"
#include "fit_slider.h"
#include "gui_test_util.h"
#include "input_panel.h"
#include "memory_view.h"
#include "mesh_view.h"
#include "pipeline_view.h"
#include "plan_table_model.h"
#include "report_export.h"
#include "session_io.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/rank_groups.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

using nlohmann::json;

namespace {

QByteArray read_all(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

void write_file(const QString& path, const std::string& text) {
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(QByteArray::fromStdString(text));
}

// Runs the event loop long enough for any search still on the worker thread to end and deliver.
void let_searches_settle() { QTest::qWait(300); }

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
    QVERIFY(shown != nullptr);
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
    test::set_inputs(window, inputs);
    QVERIFY(window.inputPanel()->errorText(InputField::seq_len).startsWith("Sequence 4096 exceeds"));  // D18: the control's label, not --seq
    QVERIFY(window.inputPanel()->errorText(InputField::model).isEmpty());
    window.inputPanel()->seqBox()->setValue(1024);
    QVERIFY(window.inputPanel()->errorText(InputField::seq_len).isEmpty());
    inputs.model = "/nonexistent/config.json";
    window.session().setInputs(inputs);
    QVERIFY(!window.inputPanel()->errorText(InputField::model).isEmpty());
  }

  void aNewerChangeCancelsAnOlderOne() {
    MainWindow window(StartState::defaults);
    QVERIFY(test::wait_for_search(window.session()));
    QSignalSpy finished(&window.session(), &PlannerSession::searchFinished);
    PlannerInputs older;
    older.seq_len = 2048;
    PlannerInputs newer;
    newer.seq_len = 1024;
    newer.global_batch = 64;
    window.session().setInputs(older);
    window.session().setInputs(newer);
    QVERIFY(test::wait_for_search(window.session()));
    let_searches_settle();
    QCOMPARE(finished.count(), 1);  // the older search delivered nothing
    const planner::PlanSearchResult result = test::planner_search(newer);
    QCOMPARE(window.planModel()->rowCount(), static_cast<int>(result.plans.size() + result.rejected.size()));
    QCOMPARE(planner::describe_plan(*window.planModel()->planAt(0)), planner::describe_plan(result.plans.front().request));
  }

  void anInvalidChangeAfterAValidOneLeavesNothingStale() {
    MainWindow window(StartState::defaults);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.planModel()->rowCount() > 0);
    QSignalSpy finished(&window.session(), &PlannerSession::searchFinished);
    PlannerInputs valid;
    valid.seq_len = 2048;
    PlannerInputs invalid = valid;
    invalid.model = "/nonexistent/config.json";
    window.session().setInputs(valid);  // its search starts on the worker thread ...
    window.session().setInputs(invalid);  // ... and must not fill the table when it ends
    let_searches_settle();
    QCOMPARE(finished.count(), 0);
    QVERIFY(!window.session().searching());
    QVERIFY(!window.session().searchResult());
    QCOMPARE(window.planModel()->rowCount(), 0);
    QVERIFY(window.session().shownPlan() == nullptr);
    QVERIFY(window.memoryView()->rows().empty());
    QVERIFY(window.verdictText().contains("invalid"));
    QVERIFY(!window.inputPanel()->errorText(InputField::model).isEmpty());
    // No export of plans for other inputs.
    QTemporaryDir dir;
    for (const char* name : {"plan.json", "plan.pdf", "report.csv", "memory.png"}) {
      const Status s = window.exportTo(dir.filePath(name));
      QVERIFY2(!s.ok(), name);
      QVERIFY(s.error().message.find("invalid") != std::string::npos);
      QVERIFY(!QFile::exists(dir.filePath(name)));
    }
    // A valid change brings everything back; plan.json names the model the plans were searched for.
    window.session().setInputs(valid);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.planModel()->rowCount() > 0);
    QVERIFY(window.session().shownPlan() != nullptr);
    QVERIFY(window.exportTo(dir.filePath("plan.json")).ok());
    auto plan_file = planner::read_plan_file(dir.filePath("plan.json").toStdString());
    QVERIFY(plan_file.ok());
    QCOMPARE(plan_file->model_source, valid.model);
  }

  void aPluginFilterChangeShowsTheSearchsBestPlan() {
    MainWindow window(StartState::defaults);
    QVERIFY(test::wait_for_search(window.session()));
    // Pick a row other than the best, so the shown plan is the user's choice.
    window.selectPlanRow(1);
    window.session().selectPlan(*window.planModel()->planAt(1));
    PlannerInputs inputs;
    inputs.plugin = planner::PluginKind::gemini;
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    const planner::PlanSearchResult gemini = test::planner_search(inputs);
    QVERIFY(window.session().shownPlan() != nullptr);
    QCOMPARE(window.session().shownPlan()->request.plugin.kind, planner::PluginKind::gemini);
    QCOMPARE(planner::describe_plan(window.session().shownPlan()->request), planner::describe_plan(gemini.plans.front().request));

    inputs.plugin.reset();
    inputs.global_batch = 2;
    window.session().setInputs(inputs);
    QVERIFY(test::wait_for_search(window.session()));
    const planner::PlanSearchResult small = test::planner_search(inputs);
    const auto& shown = window.session().shownPlan()->request;
    QCOMPARE(shown.training.micro_batch_size * shown.training.num_micro_batches * shown.layout.dp, int64_t{2});
    QCOMPARE(planner::describe_plan(shown), planner::describe_plan(small.plans.front().request));

    // A what-if change (the sequence) carries the chosen plan over, and the search's end leaves it in view.
    const auto second = window.planModel()->planAt(1);
    QVERIFY(second.has_value());
    window.session().selectPlan(*second);
    const std::string chosen = planner::describe_plan(window.session().shownPlan()->request);
    inputs.seq_len = 2048;
    window.session().setInputs(inputs);
    QCOMPARE(planner::describe_plan(window.session().shownPlan()->request), chosen);
    QCOMPARE(window.session().shownPlan()->request.training.seq_len, int64_t{2048});
    QVERIFY(test::wait_for_search(window.session()));
    QCOMPARE(planner::describe_plan(window.session().shownPlan()->request), chosen);
  }

  // D1: sequence, batch and GPU count re-estimate the plan in view, however far over capacity it goes.
  void whatIfKeepsThePlanInViewAndShowsItOverCapacity() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    // The plan a user picks from the table (the search's best has tp 1 under today's simulator).
    for (const auto& plan : window.session().searchResult()->plans) {
      if (plan.request.layout.tp == 2 && plan.request.layout.pp == 2 && plan.request.plugin.model_chunks() > 1) {
        window.session().selectPlan(plan.request);
        break;
      }
    }
    const planner::EstimateRequest picked = window.session().shownPlan()->request;  // hybrid dp 4 × tp 2 × pp 2, micro-batch 1 × 8
    QCOMPARE(picked.layout.tp, int64_t{2});
    QTRY_VERIFY(window.session().fitLimits().global_batch > 0);  // computed just after the views have the plan
    const planner::ParallelLayout layout = picked.layout;
    const auto planner_estimate = [&](const planner::EstimateRequest& plan) {
      return planner::estimate_memory(window.session().model(), window.session().planRequest().cluster.gpu, plan).value();
    };

    // It fits as it is, so both sliders' marks lie at or beyond the current values (32 sequences of 4096 tokens).
    QVERIFY(window.session().fitLimits().global_batch >= 32);
    QVERIFY(window.session().fitLimits().seq_len >= 4096);
    QVERIFY(window.inputPanel()->fitText(InputField::global_batch).startsWith("the plan fits up to"));
    // A larger batch is more micro-batches, whose memory the pipeline's schedule bounds: the limit is the plan's
    // most micro-batches, not memory, and the line says so.
    QVERIFY(!window.session().fitLimits().global_batch_bounded_by_memory);
    QVERIFY(window.inputPanel()->fitText(InputField::global_batch).endsWith("every value it can take"));

    // A sequence it cannot hold: the same layout, its own estimate, red with the amount over, before and after the search.
    window.inputPanel()->seqBox()->setValue(65536);
    for (int pass = 0; pass < 2; ++pass) {
      const auto& shown = *window.session().shownPlan();
      QCOMPARE(shown.request.layout.tp, layout.tp);
      QCOMPARE(shown.request.layout.pp, layout.pp);
      QCOMPARE(shown.request.plugin.pp_schedule, picked.plugin.pp_schedule);
      QCOMPARE(shown.request.training.seq_len, int64_t{65536});
      const planner::MemoryEstimate expected = planner_estimate(shown.request);
      QVERIFY(!expected.fits());
      QCOMPARE(window.memoryView()->rows().front().device_total, expected.ranks.front().device_total);
      QVERIFY(window.verdictText().contains("DOES NOT FIT"));
      QVERIFY(window.verdictText().contains(bytes_text(-expected.tightest().margin) + " over"));
      QVERIFY(test::wait_for_search(window.session()));
    }

    // The slider marks the largest power of two at which this plan fits: it fits there and not at twice that.
    const int64_t seq_limit = window.session().fitLimits().seq_len;
    QVERIFY(seq_limit >= 128 && seq_limit < 65536);
    planner::EstimateRequest at = window.session().shownPlan()->request;
    at.training.seq_len = seq_limit;
    QVERIFY(planner_estimate(at).fits());
    at.training.seq_len = 2 * seq_limit;
    QVERIFY(!planner_estimate(at).fits());
    QCOMPARE(*window.inputPanel()->seqSlider()->fitLimit(), static_cast<int>(std::log2(seq_limit)));
    QVERIFY(window.inputPanel()->fitText(InputField::seq_len).contains(QLocale().toString(static_cast<qlonglong>(seq_limit))));
    QVERIFY(window.session().fitLimits().seq_len_bounded_by_memory);
    QVERIFY(!window.inputPanel()->fitText(InputField::seq_len).contains("every value"));

    // Twice the GPUs: dp doubles, tp and pp stay, the batch splits into half the micro-batches.
    window.inputPanel()->seqBox()->setValue(4096);
    window.inputPanel()->gpusBox()->setValue(32);
    const auto& wider = *window.session().shownPlan();
    QCOMPARE(wider.request.layout.dp, 2 * layout.dp);
    QCOMPARE(wider.request.layout.tp, layout.tp);
    QCOMPARE(wider.request.training.micro_batch_size * wider.request.training.num_micro_batches * wider.request.layout.dp, int64_t{32});
    QCOMPARE(wider.memory.ranks.front().device_total, planner_estimate(wider.request).ranks.front().device_total);

    // Four times the batch: the micro-batches follow.
    window.inputPanel()->globalBatchBox()->setValue(128);
    QCOMPARE(window.session().shownPlan()->request.training.num_micro_batches, 128 / (2 * layout.dp) / picked.training.micro_batch_size);
    QVERIFY(window.session().carryNote().isEmpty());
    QVERIFY(test::wait_for_search(window.session()));

    // 6 GPUs: tp × pp no longer divides the cluster, so the search's best replaces the plan, and the app says why.
    window.inputPanel()->gpusBox()->setValue(6);
    QVERIFY(window.session().carryNote().contains("does not divide 6 GPUs"));
    QVERIFY(test::wait_for_search(window.session()));
    QCOMPARE(window.session().shownPlan()->request.layout.world_size(), int64_t{6});
  }

  void measuredRunOverlayShowsTheErrors() {
    auto model = planner::load_model("tiny-gpt2");
    QVERIFY(model.ok());
    const planner::EstimateRequest request = test::cpu_training_request();
    const auto predicted = planner::estimate_memory(model.value(), planner::load_gpu("h100-80g").value(), request);
    QVERIFY(predicted.ok());
    const MemoryBreakdown& p = predicted->ranks.front().bytes;
    QTemporaryDir dir;
    const QString path = dir.filePath("metrics.json");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::fromStdString(test::metrics_json(model.value(), request, p)));
    file.close();

    MainWindow window(StartState::defaults);
    window.openPath(path);
    QVERIFY(window.session().measured().has_value());
    QVERIFY(window.comparisonTable()->isColumnHidden(ComparisonModel::kRank));  // one rank: no rank column
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
    // D11: a CPU run is predicted on the CPU: its RAM is the capacity, its step simulated there, not on an H100.
    const planner::GpuProfile cpu = planner::host_cpu_profile();
    QCOMPARE(window.session().inputs().gpu, std::string("cpu"));
    QCOMPARE(window.memoryView()->rows().front().gpu_capacity, cpu.memory_bytes);
    const planner::ClusterSpec on_cpu = planner::make_cluster(cpu, 1, 1, window.session().inputs().inter_node_gbit_s).value();
    const auto step = planner::simulate_step(model.value(), on_cpu, request, predicted.value(), window.session().planRequest().simulation, false);
    QVERIFY(step.ok());
    QCOMPARE(window.session().shownPlan()->simulation.step_time_s, step->step_time_s);
    // Another layout or sequence: the overlay no longer applies and goes.
    PlannerInputs inputs = window.session().inputs();
    inputs.seq_len = 32;
    window.session().setInputs(inputs);
    QVERIFY(!window.session().measured().has_value());
    QVERIFY(!window.memoryView()->measured().has_value());
  }

  // A 4-rank DDP run: the box names the rank count and the table lists every rank's categories, rank 2's off.
  void aMeasuredRunOfFourRanksShowsEachRank() {
    auto model = planner::load_model("tiny-gpt2");
    QVERIFY(model.ok());
    planner::EstimateRequest request = test::cpu_training_request();
    request.layout.dp = 4;
    const auto predicted = planner::estimate_memory(model.value(), planner::load_gpu("h100-80g").value(), request);
    QVERIFY(predicted.ok());
    const MemoryBreakdown& p = predicted->ranks.front().bytes;
    // Every rank measures the prediction exactly but rank 2, whose activations measure 80% of it.
    json metrics = json::parse(test::metrics_json(model.value(), request, p));
    const json off_row = metrics["ranks"][0];
    json exact_row = off_row;
    exact_row["categories"]["activations"]["device_bytes"] = p[MemoryCategory::activations].device;
    metrics["ranks"] = json::array();
    for (int rank = 0; rank < 4; ++rank) {
      json row = rank == 2 ? off_row : exact_row;
      row["ranks"] = json::array({rank, rank});
      metrics["ranks"].push_back(row);
    }
    QTemporaryDir dir;
    write_file(dir.filePath("metrics.json"), metrics.dump(2));

    MainWindow window(StartState::defaults);
    window.openPath(dir.filePath("metrics.json"));
    QVERIFY2(window.problemText().isEmpty(), qPrintable(window.problemText()));
    QVERIFY(window.session().measured().has_value());
    const ComparisonModel* table = window.comparisonModel();
    QCOMPARE(table->rankCount(), 4);
    QCOMPARE(table->rowCount(), 4 * kNumMemoryCategories);
    QVERIFY(!window.comparisonTable()->isColumnHidden(ComparisonModel::kRank));
    const auto* box = qobject_cast<QGroupBox*>(window.comparisonTable()->parentWidget());
    QVERIFY(box != nullptr);
    QVERIFY2(box->title().contains("(4 ranks)"), qPrintable(box->title()));
    const int activations = static_cast<int>(MemoryCategory::activations);
    const int64_t off = p[MemoryCategory::activations].device * 8 / 10;
    const double error = 100.0 * static_cast<double>(p[MemoryCategory::activations].device - off) / static_cast<double>(off);
    for (int rank = 0; rank < 4; ++rank) {
      const int row = rank * kNumMemoryCategories + activations;
      QCOMPARE(table->index(row, ComparisonModel::kRank).data().toString(), QString::number(rank));
      QCOMPARE(table->index(row, ComparisonModel::kError).data(Qt::UserRole).toDouble(), rank == 2 ? error : 0.0);
    }
  }

  // `tessera train --model myconfig.json` names the model "myconfig" and writes config.json next to metrics.json.
  void aMeasuredRunOfAConfigJsonModelOpens() {
    auto config_text = planner::model_config_text("tiny-gpt2");
    QVERIFY(config_text.ok());
    QTemporaryDir dir;
    write_file(dir.filePath("config.json"), config_text.value());
    auto model = planner::load_model(dir.filePath("config.json").toStdString());
    QVERIFY(model.ok());
    const planner::EstimateRequest request = test::cpu_training_request();
    const auto predicted = planner::estimate_memory(model.value(), planner::load_gpu("h100-80g").value(), request);
    QVERIFY(predicted.ok());
    json metrics = json::parse(test::metrics_json(model.value(), request, predicted->ranks.front().bytes));
    metrics["model"]["name"] = "myconfig";
    write_file(dir.filePath("metrics.json"), metrics.dump(2));

    MainWindow window(StartState::defaults);
    window.openPath(dir.filePath("metrics.json"));
    QVERIFY2(window.problemText().isEmpty(), qPrintable(window.problemText()));
    QVERIFY(window.session().measured().has_value());
    QCOMPARE(window.session().inputs().model, dir.filePath("config.json").toStdString());
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.session().measured().has_value());  // the run's own plan stays shown after the search

    // Without the config.json the error says so, and stays on screen after the search's status message.
    QVERIFY(QFile::remove(dir.filePath("config.json")));
    window.openPath(dir.filePath("metrics.json"));
    QVERIFY2(window.problemText().contains("config.json"), qPrintable(window.problemText()));
    QVERIFY(test::wait_for_search(window.session()));
    let_searches_settle();
    QVERIFY(window.problemText().contains("config.json"));
  }

  // D6: an opened config.json is listed by its folder, then by its name and size; the tooltip has the path.
  void anOpenedConfigIsListedByNameAndSize() {
    MainWindow window(StartState::defaults);
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("Llama-Test"));
    const QString path = dir.filePath("Llama-Test/config.json");
    QVERIFY(QFile::copy(QStringLiteral(TESSERA_SOURCE_DIR "/models/llama-2-7b.json"), path));
    window.openPath(path);
    QVERIFY(window.inputPanel()->errorText(InputField::model).isEmpty());
    const QComboBox* models = window.inputPanel()->modelBox();
    const QString expected = QStringLiteral("Llama-Test · %1 parameters").arg(QString::fromStdString(planner::format_count(window.session().model().parameter_count)));
    QCOMPARE(models->currentText(), expected);
    QVERIFY(expected.contains("6.7B"));
    QCOMPARE(models->itemData(models->currentIndex(), Qt::ToolTipRole).toString(), path);
  }

  // D10: a cluster preset shows its own GPU, count and network in the greyed fields.
  void aClusterPresetFillsTheGpuFields() {
    MainWindow window(StartState::defaults);
    InputPanel& panel = *window.inputPanel();
    panel.gpusBox()->setValue(4096);
    QComboBox* clusters = panel.findChild<QComboBox*>(QString(), Qt::FindChildrenRecursively);
    for (QComboBox* combo : panel.findChildren<QComboBox*>()) {
      if (combo->itemText(0).startsWith("custom")) clusters = combo;
    }
    QVERIFY(clusters->count() > 1);
    clusters->setCurrentIndex(1);
    const auto preset = planner::load_cluster(clusters->currentData().toString().toStdString());
    QVERIFY(preset.ok());
    QVERIFY(!panel.gpusBox()->isEnabled());
    QCOMPARE(panel.gpusBox()->value(), static_cast<int>(preset->world_size()));
    QCOMPARE(panel.inputs().gpus, preset->world_size());
    QCOMPARE(panel.inputs().gpu, preset->gpu.name);
    QCOMPARE(panel.inputs().gpus_per_node, preset->gpus_per_node);
    QCOMPARE(window.session().inputs().gpus, preset->world_size());  // what was emitted, too
  }

  // D19: a typed 0 stays and is refused by name; D18: a broken config.json is one line without the parser's tag.
  void zeroAndBrokenFilesAreRefusedInPlainWords() {
    MainWindow window(StartState::defaults);
    window.inputPanel()->globalBatchBox()->setValue(0);
    QCOMPARE(window.inputPanel()->globalBatchBox()->value(), 0);
    QCOMPARE(window.inputPanel()->errorText(InputField::global_batch), QStringLiteral("Global batch must be a positive integer, got 0"));
    QVERIFY(!window.exportAction()->isEnabled());
    window.inputPanel()->globalBatchBox()->setValue(32);
    window.inputPanel()->gpusBox()->setValue(0);
    QCOMPARE(window.inputPanel()->errorText(InputField::gpus), QStringLiteral("GPUs must be a positive integer, got 0"));

    QTemporaryDir dir;
    write_file(dir.filePath("config.json"), "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 4096,\n  oops\n}\n");
    window.openPath(dir.filePath("config.json"));
    const QString model_error = window.inputPanel()->errorText(InputField::model) + window.problemText();
    QVERIFY(!model_error.isEmpty());
    QVERIFY2(!model_error.contains("json.exception") && !model_error.contains('\n') && !model_error.contains("--"), qPrintable(model_error));
    QVERIFY2(model_error.contains("line 4"), qPrintable(model_error));
  }

  void fileErrorsNameTheProblemAndStay() {
    MainWindow window(StartState::defaults);
    QTemporaryDir dir;
    write_file(dir.filePath("typed.json"), R"({"schema": 1, "kind": "tessera-gui-session", "gpus": "sixteen"})");
    window.openPath(dir.filePath("typed.json"));
    QVERIFY2(window.problemText().contains("\"gpus\""), qPrintable(window.problemText()));
    // Truncated or unreadable JSON is reported as such, not taken for a model config.
    const PlannerInputs before = window.session().inputs();
    write_file(dir.filePath("truncated.json"), "{\"schema\": 1, \"kind\": \"metr");
    window.openPath(dir.filePath("truncated.json"));
    QVERIFY(!window.problemText().isEmpty());
    QVERIFY(window.session().inputs() == before);
    window.openPath(dir.filePath("missing.json"));
    QVERIFY(!window.problemText().isEmpty());
    QVERIFY(window.session().inputs() == before);
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(!window.problemText().isEmpty());
    // A good file clears it.
    QVERIFY(save_session(dir.filePath("good.json").toStdString(), PlannerInputs{}).ok());
    window.openPath(dir.filePath("good.json"));
    QVERIFY(window.problemText().isEmpty());
  }

  // D4: Ctrl+= zooms the pipeline as Ctrl++ does, also from an input (D2's Ctrl+E needs X11's key bindings: gui_xvfb_test).
  void ctrlEqualsZoomsThePipeline() {
    MainWindow window(StartState::defaults);
    window.show();
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    QVERIFY(test::wait_for_search(window.session()));
    window.showView(View::pipeline);
    const auto [start, end] = window.pipelineView()->visibleRange();
    QTest::keyClick(window.inputPanel()->seqBox(), Qt::Key_Equal, Qt::ControlModifier);
    const auto [zoomed_start, zoomed_end] = window.pipelineView()->visibleRange();
    QCOMPARE((zoomed_end - zoomed_start) * 1.25, end - start);
  }

  // D7, D8, D9, D12: the export dialog's filter names the suffix; Export waits for valid inputs;
  // an export's error goes with the inputs that caused it; the search summary outlives messages.
  void exportsFollowTheInputs() {
    QCOMPARE(with_export_suffix("/tmp/report", "HTML, the shown plan (*.html)"), QStringLiteral("/tmp/report.html"));
    QCOMPARE(with_export_suffix("/tmp/report.md", "HTML, the shown plan (*.html)"), QStringLiteral("/tmp/report.md"));
    QCOMPARE(with_export_suffix("/tmp/plan", export_file_filter().split(";;").front()), QStringLiteral("/tmp/plan.pdf"));

    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.exportAction()->isEnabled());
    QVERIFY(window.searchSummaryText().startsWith("Searched"));
    QTemporaryDir dir;
    window.exportFile(dir.filePath("memory.png"));
    QVERIFY(window.problemText().isEmpty());
    QVERIFY(window.searchSummaryText().startsWith("Searched"));  // beside "Exported ...", not replaced by it

    window.exportFile(dir.filePath("no-such-folder/plan.pdf"));
    QVERIFY(window.problemText().contains("cannot write"));
    window.inputPanel()->seqBox()->setValue(2048);
    QVERIFY(window.problemText().isEmpty());

    PlannerInputs invalid;
    invalid.model = "/nonexistent/config.json";
    test::set_inputs(window, invalid);
    QVERIFY(!window.exportAction()->isEnabled());
    test::set_inputs(window, PlannerInputs{});
    QVERIFY(test::wait_for_search(window.session()));
    QVERIFY(window.exportAction()->isEnabled());
  }

  void outOfRangeSessionValuesAreRejectedByName() {
    // Plain literals: moc reads braces inside raw strings as code, and slots after an unbalanced one vanish.
    const std::string head = "{\"schema\": 1, \"kind\": \"tessera-gui-session\", ";
    for (auto [field, value] : {std::pair{"gpus", "0"}, std::pair{"gpus", "2097152"}, std::pair{"seq_len", "3e9"}, std::pair{"seq_len", "3000000000"},
                                std::pair{"global_batch_size", "-4"}, std::pair{"gpus_per_node", "4096"}, std::pair{"inter_node_gbps", "0"},
                                std::pair{"model", "7"}}) {
      const std::string text = head + "\"" + field + "\": " + value + "}";
      auto loaded = session_from_json(text, "s.json");
      QVERIFY2(!loaded.ok(), text.c_str());
      QVERIFY2(loaded.error().message.find(std::string("\"") + field + "\"") != std::string::npos, loaded.error().message.c_str());
    }
    // The limits themselves load, and the controls show them unclamped.
    auto loaded = session_from_json(head + "\"gpus\": 1048576, \"seq_len\": 1048576, \"global_batch_size\": 16777216, \"gpus_per_node\": 1024}", "s.json");
    QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().message.c_str());
    InputPanel panel;
    panel.setInputs(loaded.value());
    QVERIFY(panel.inputs() == loaded.value());
  }

  void errorsLandNextToTheirControl() {
    MainWindow window(StartState::defaults);
    PlannerInputs inputs;
    inputs.inter_node_gbit_s = 0;
    window.session().setInputs(inputs);
    QVERIFY(window.inputPanel()->errorText(InputField::network).startsWith("Network must lie in"));
    inputs = PlannerInputs{};
    inputs.global_batch = planner::kMaxGlobalBatchSize + 1;
    window.session().setInputs(inputs);
    QVERIFY(!window.inputPanel()->errorText(InputField::global_batch).isEmpty());
    inputs = PlannerInputs{};
    inputs.seq_len = planner::kMaxSeqLen + 1;
    window.session().setInputs(inputs);
    QVERIFY(!window.inputPanel()->errorText(InputField::seq_len).isEmpty());
    QVERIFY(window.inputPanel()->errorText(InputField::global_batch).isEmpty());
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
      QCOMPARE(png.size(), window.printedPart(view)->size());
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
    const planner::EstimateReport facts{window.session().model(), window.session().planRequest().cluster.gpu, shown.request, shown.memory, &shown.simulation};
    for (auto [suffix, format] : {std::pair{"csv", planner::ReportFormat::csv}, std::pair{"md", planner::ReportFormat::md},
                                  std::pair{"html", planner::ReportFormat::html}}) {
      const QString path = dir.filePath(QStringLiteral("report.") + suffix);
      QVERIFY(window.exportTo(path).ok());
      QCOMPARE(read_all(path).toStdString(), planner::render_estimate(facts, format));
    }
    QVERIFY(!window.exportTo(dir.filePath("report.docx")).ok());
  }

  // The report draws the views at a print width of their own and gives them back their sizes.
  void pdfExportLeavesTheWindowAsItWas() {
    MainWindow window(StartState::defaults);
    window.resize(1280, 800);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    std::vector<QSize> before;
    for (View view : kAllViews) before.push_back(window.viewWidget(view)->size());
    const QSize pipeline = window.pipelineView()->canvas()->size();
    QTemporaryDir dir;
    QVERIFY(window.exportTo(dir.filePath("plan.pdf")).ok());
    QVERIFY(read_all(dir.filePath("plan.pdf")).startsWith("%PDF"));
    for (View view : kAllViews) QCOMPARE(window.viewWidget(view)->size(), before[static_cast<size_t>(view)]);
    QCOMPARE(window.pipelineView()->canvas()->size(), pipeline);
  }

  void largeMeshesAndManyStagesStayLegible() {
    QCOMPARE(fitting_text({"rank 12", "12"}, QFontMetricsF(QFont()), QFontMetricsF(QFont()).horizontalAdvance("12")), QStringLiteral("12"));
    QVERIFY(fitting_text({"rank 12", "12"}, QFontMetricsF(QFont()), 2).isEmpty());
    MainWindow window(StartState::defaults);
    window.resize(1280, 800);
    window.show();
    PlannerInputs inputs = test::large_example();
    test::set_inputs(window, inputs);
    QVERIFY(test::wait_for_search(window.session()));
    window.showView(View::mesh);
    window.meshView()->grab();  // paints
    QVERIFY2(window.meshView()->tileSize().width() >= 8 && window.meshView()->tileSize().height() >= 6,
             qPrintable(QStringLiteral("%1 x %2").arg(window.meshView()->tileSize().width()).arg(window.meshView()->tileSize().height())));
    // Out-of-range ranks are refused.
    const int64_t world = window.session().shownPlan()->request.layout.world_size();
    QVERIFY(window.meshView()->selectRank(world - 1));
    QVERIFY(!window.meshView()->selectRank(world));
    QVERIFY(!window.meshView()->selectRank(-1));
    QCOMPARE(window.meshView()->selectedRank(), world - 1);

    // 16 pipeline stages at 1280x800: every lane and the legend are there to scroll to.
    inputs.gpus = 64;
    inputs.global_batch = 32;
    window.session().setInputs(inputs);
    QVERIFY(test::wait_for_search(window.session()));
    planner::EstimateRequest plan;
    plan.plugin.kind = planner::PluginKind::hybrid_parallel;
    plan.plugin.zero_stage = 0;
    plan.layout = planner::ParallelLayout{1, 4, 16, false};
    plan.training.micro_batch_size = 1;
    plan.training.num_micro_batches = 32;
    plan.training.seq_len = inputs.seq_len;
    window.session().selectPlan(plan);
    QCOMPARE(window.session().shownPlan()->request.layout.pp, int64_t{16});
    window.showView(View::pipeline);
    QCoreApplication::processEvents();
    QVERIFY(window.pipelineView()->showsEveryStage());
  }

  void pipelineZoomIsBounded() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    const double step = window.session().shownPlan()->simulation.step_time_s;
    for (int i = 0; i < 500; ++i) window.pipelineView()->zoomIn();
    auto [start, end] = window.pipelineView()->visibleRange();
    QVERIFY(end - start >= step * 1e-6 && std::isfinite(start));
    for (int i = 0; i < 500; ++i) window.pipelineView()->zoomOut();
    std::tie(start, end) = window.pipelineView()->visibleRange();
    QVERIFY(end - start <= step * 11);
    QVERIFY(end > 0 && start < step);  // the step stays in view
  }

  void memoryViewAsksForRoomForEveryRow() {
    MainWindow window(StartState::defaults);
    QVERIFY(test::wait_for_search(window.session()));
    const int without = window.memoryView()->minimumSizeHint().height();
    MemoryBreakdown measured;
    measured.add(MemoryCategory::parameters, MemorySpace::device, 1 << 30);
    window.memoryView()->setMeasured(measured);
    QVERIFY(window.memoryView()->minimumSizeHint().height() > without);
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
    QVERIFY(!session_from_json(R"({"schema": 1, "kind": "tessera-gui-session", "precision": "fp4"})", "s").ok());
  }

  void meshAndPipelineShowThePlan() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
    // A plan with every axis: tensor, data and pipeline groups of more than one rank.
    const auto& plans = window.session().searchResult()->plans;
    const auto three_d = std::find_if(plans.begin(), plans.end(), [](const planner::Candidate& c) {
      return c.request.layout.tp > 1 && c.request.layout.dp > 1 && c.request.layout.pp > 1;
    });
    QVERIFY2(three_d != plans.end(), "the example ranks no tp × dp × pp plan");
    window.session().selectPlan(three_d->request);
    const auto& layout = window.session().shownPlan()->request.layout;
    window.meshView()->selectRank(5);
    for (planner::MeshAxis axis : {planner::MeshAxis::tensor, planner::MeshAxis::data, planner::MeshAxis::pipeline}) {
      QStringList members;
      for (int64_t r : planner::group_members(layout, 5, axis)) members << QString::number(r);
      QVERIFY(window.meshView()->selectedRankText().contains("{" + members.join(", ")));
    }
    // A fully sharded plan: rank 5's tensor and pipeline groups are itself alone, its states one shard of dp.
    const auto sharded = std::find_if(plans.begin(), plans.end(), [](const planner::Candidate& c) {
      return c.request.plugin.kind == planner::PluginKind::torch_fsdp && c.request.layout.tp == 1 && c.request.layout.pp == 1;
    });
    QVERIFY2(sharded != plans.end(), "the example ranks no torch_fsdp plan");
    window.session().selectPlan(sharded->request);
    window.meshView()->selectRank(5);
    const QString text = window.meshView()->selectedRankText();
    QVERIFY2(text.contains("tensor {5} (1 rank)"), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("ZeRO-3: shard 5 of %1 of the model states").arg(sharded->request.layout.dp)), qPrintable(text));
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
    test::set_inputs(window, test::large_example());
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

  void screenshotModeWritesAPngPerViewAtTheAskedSize() {
    QTemporaryDir dir;
    QProcess gui;
    gui.start(TESSERA_GUI_BINARY, {"--screenshot", dir.path(), "--size", "1920x1080"});
    QVERIFY(gui.waitForFinished(60000));
    QCOMPARE(gui.exitCode(), 0);
    for (View view : kAllViews) {
      const QImage png(dir.filePath(MainWindow::viewName(view) + ".png"));
      QVERIFY2(!png.isNull(), qPrintable(MainWindow::viewName(view)));
      QCOMPARE(png.size(), QSize(1920, 1080));
    }
    QProcess bad;
    bad.start(TESSERA_GUI_BINARY, {"--screenshot", dir.path(), "--size", "big"});
    QVERIFY(bad.waitForFinished(60000));
    QCOMPARE(bad.exitCode(), 2);
  }

  // A session's inputs instead of the example: a valid one is shot, one the
  // planner refuses says why (so the session, not the example, was applied).
  void screenshotModeShootsASession() {
    QTemporaryDir dir;
    const auto write_session = [&](const char* name, const std::string& text) {
      const QString path = dir.filePath(QString::fromLatin1(name));
      QFile file(path);
      if (!file.open(QIODevice::WriteOnly)) return QString();
      file.write(text.data(), static_cast<qint64>(text.size()));
      return path;
    };
    const std::string common = R"("schema": 1, "kind": "tessera-gui-session", "model": "gpt2", "gpus": 8, "global_batch_size": 64, "seq_len": 1024)";
    const QString good = write_session("deepspeed.json", "{" + common + R"(, "runtime": "deepspeed"})");
    QProcess gui;
    gui.start(TESSERA_GUI_BINARY, {good, "--screenshot", dir.filePath("shots")});
    QVERIFY(gui.waitForFinished(60000));
    QCOMPARE(gui.exitCode(), 0);
    QVERIFY(!QImage(dir.filePath("shots/plans.png")).isNull());
    const QString refused = write_session("refused.json", "{" + common + R"(, "runtime": "megatron", "plugin": "gemini"})");
    QProcess bad;
    bad.start(TESSERA_GUI_BINARY, {refused, "--screenshot", dir.filePath("never")});
    QVERIFY(bad.waitForFinished(60000));
    QCOMPARE(bad.exitCode(), 1);
    QVERIFY2(bad.readAllStandardError().contains("refused.json: --runtime megatron searches hybrid_parallel plans"), "the session's refusal");
  }
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::WindowTest)
#include "gui_window_test.moc"

// The item models under QAbstractItemModelTester, filled with real search
// results, and their numbers against the planner's.
#include <algorithm>

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QBrush>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

#include "category_style.h"
#include "comparison_model.h"
#include "group_colours.h"
#include "gui_test_util.h"
#include "plan_difference_model.h"
#include "plan_table_model.h"
#include "planner_inputs.h"
#include "tessera/planner/hardware.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

class ModelsTest : public QObject {
  Q_OBJECT

 private slots:
  // A control change does not read the GPU profile's file again: the one read
  // last is kept while the inputs name it, and read anew once they name another.
  void theGpuProfileIsReadOncePerName() {
    QTemporaryDir dir;
    const std::string path = dir.filePath(QStringLiteral("gpu.json")).toStdString();
    planner::GpuProfile gpu = planner::load_gpu("h100-80g").value();
    GpuProfileCache cache;
    const auto write = [&](const char* name) {
      gpu.name = name;
      std::ofstream(path) << planner::gpu_profile_to_json(gpu);
    };
    const auto name_read = [&] {
      auto read = cache.get(path);
      return read ? read.value().name : read.error().message;
    };
    write("first");
    QCOMPARE(name_read(), std::string("first"));
    write("second");
    QCOMPARE(name_read(), std::string("first"));
    QVERIFY(cache.get("h100-80g").ok());
    QCOMPARE(name_read(), std::string("second"));
    QVERIFY(!cache.get(dir.filePath(QStringLiteral("missing.json")).toStdString()).ok());
  }

  void planTableHoldsEveryPlanAndRejection() {
    const auto result = std::make_shared<const planner::PlanSearchResult>(test::planner_search(PlannerInputs{}));
    PlanTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const int64_t capacity = planner::load_gpu("h100-80g").value().memory_bytes;
    model.setResult(result, capacity);
    QCOMPARE(model.rowCount(), static_cast<int>(result->plans.size() + result->rejected.size()));
    QCOMPARE(model.columnCount(), static_cast<int>(PlanTableModel::kColumnCount));
    const planner::Candidate& best = result->plans.front();
    QCOMPARE(model.index(0, PlanTableModel::kTokensPerS).data(PlanTableModel::kSortRole).toDouble(), best.simulation.tokens_per_s);
    QCOMPARE(model.index(0, PlanTableModel::kMemory).data().toString(), QString::fromStdString(planner::format_bytes(best.peak_device_bytes())));
    QCOMPARE(model.index(0, PlanTableModel::kFits).data().toString(), QStringLiteral("yes"));
    QCOMPARE(planner::describe_plan(*model.planAt(0)), planner::describe_plan(best.request));
    // A rejection row: the closest candidate's memory is the capacity plus its overflow.
    const int first_rejection = static_cast<int>(result->plans.size());
    const auto& [reason, rejection] = *result->rejected.begin();
    QCOMPARE(model.index(first_rejection, PlanTableModel::kFits).data().toString(), QStringLiteral("no"));
    QVERIFY(model.index(first_rejection, PlanTableModel::kReason).data().toString().contains(QString::fromStdString(reason)));
    QCOMPARE(model.index(first_rejection, PlanTableModel::kMemory).data(PlanTableModel::kSortRole).toLongLong(),
             static_cast<qlonglong>(capacity + rejection.closest_overflow_bytes));
    QCOMPARE(model.rowOf(best.request), 0);
    model.setResult(nullptr, capacity);  // a reset under the tester
    QCOMPARE(model.rowCount(), 0);
  }

  // D5: plans that differ only in their pipeline schedule differ in the table.
  void planTableTellsSchedulesApart() {
    const auto result = std::make_shared<const planner::PlanSearchResult>(test::planner_search(PlannerInputs{}));
    PlanTableModel model;
    model.setResult(result, 80LL << 30);
    QStringList interleaved_rows, one_f_one_b_rows;
    for (int row = 0; row < static_cast<int>(result->plans.size()); ++row) {
      const planner::EstimateRequest& r = result->plans[static_cast<size_t>(row)].request;
      const QString schedule = model.index(row, PlanTableModel::kSchedule).data().toString();
      if (r.layout.pp == 1) QCOMPARE(schedule, QStringLiteral("–"));
      else if (r.plugin.pp_schedule == planner::PipelineSchedule::interleaved) QCOMPARE(schedule, QStringLiteral("interleaved × %1").arg(r.plugin.num_model_chunks));
      else if (r.plugin.pp_schedule == planner::PipelineSchedule::one_f_one_b) QCOMPARE(schedule, QStringLiteral("1F1B"));
      QStringList cells;
      for (int column = PlanTableModel::kPlugin; column <= PlanTableModel::kMicroBatch; ++column) cells << model.index(row, column).data().toString();
      (r.plugin.pp_schedule == planner::PipelineSchedule::interleaved ? interleaved_rows : one_f_one_b_rows) << cells.join('|');
    }
    // The default example ranks hybrid 4×2×2 +sp, ZeRO 1, no recompute, 1 × 8 both interleaved (× 10, one block per virtual stage) and 1F1B.
    QVERIFY(interleaved_rows.contains(QStringLiteral("hybrid_parallel|4×2×2 +sp|interleaved × 10|1|none|none|1 × 8")));
    QVERIFY(one_f_one_b_rows.contains(QStringLiteral("hybrid_parallel|4×2×2 +sp|1F1B|1|none|none|1 × 8")));
  }

  // Gemini's static fractions are ColossalAI's, not shares of the states: the table says how many chunks each sends.
  void planTableSaysHowManyChunksAStaticGeminiPlanOffloads() {
    PlannerInputs inputs;
    inputs.model = "gpt2-medium";
    inputs.gpus = 8;
    inputs.seq_len = 1024;
    inputs.plugin = PluginKind::gemini;
    const auto result = std::make_shared<const planner::PlanSearchResult>(test::planner_search(inputs));
    PlanTableModel model;
    model.setResult(result, 80LL << 30);
    QSet<QString> offloads;
    for (int row = 0; row < static_cast<int>(result->plans.size()); ++row) offloads << model.index(row, PlanTableModel::kOffload).data().toString();
    // 7 chunks: a quarter, a half and three quarters of them rounded, then all.
    for (const char* expected : {"optim 2 of 7 chunks", "optim 4 of 7 chunks", "optim 5 of 7 chunks", "optim 100%", "none", "auto"}) {
      QVERIFY2(offloads.contains(QString::fromLatin1(expected)), expected);
    }
  }

  void planTableSortsNumerically() {
    const auto result = std::make_shared<const planner::PlanSearchResult>(test::planner_search(PlannerInputs{}));
    PlanTableModel model;
    model.setResult(result, 80LL << 30);
    QSortFilterProxyModel proxy;
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(&model);
    proxy.setSortRole(PlanTableModel::kSortRole);
    proxy.sort(PlanTableModel::kMemory, Qt::AscendingOrder);
    int64_t smallest = std::numeric_limits<int64_t>::max();
    for (const planner::Candidate& c : result->plans) smallest = std::min(smallest, c.peak_device_bytes());
    QCOMPARE(proxy.index(0, PlanTableModel::kMemory).data(PlanTableModel::kSortRole).toLongLong(), static_cast<qlonglong>(smallest));
  }

  // Two ranked plans side by side: each category's bytes on the tightest rank
  // and each step-time component, and B − A, from the planner's own figures.
  void planDifferenceShowsMemoryAndStepTimeAsADifference() {
    const auto result = test::planner_search(PlannerInputs{});
    // The two best plans without gathered-parameter buffers (no FSDP units, no Gemini chunks), B slower than A.
    const auto without_chunks = [](const planner::Candidate& c) { return c.memory.tightest().bytes[MemoryCategory::chunk_buffers].device == 0; };
    const auto a_it = std::find_if(result.plans.begin(), result.plans.end(), without_chunks);
    QVERIFY(a_it != result.plans.end());
    const auto b_it = std::find_if(a_it + 1, result.plans.end(), [&](const planner::Candidate& c) {
      return without_chunks(c) && c.simulation.tokens_per_s < a_it->simulation.tokens_per_s;
    });
    QVERIFY(b_it != result.plans.end());
    const planner::Candidate& a = *a_it;
    const planner::Candidate& b = *b_it;
    PlanDifferenceModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPlans(plan_figures("A", a.memory, a.simulation), plan_figures("B", b.memory, b.simulation));
    QCOMPARE(model.columnCount(), static_cast<int>(PlanDifferenceModel::kColumnCount));
    const auto row_named = [&](const QString& name) {
      for (int row = 0; row < model.rowCount(); ++row) {
        if (model.index(row, PlanDifferenceModel::kQuantity).data().toString() == name) return row;
      }
      return -1;
    };
    const auto difference = [&](const QString& name) { return model.index(row_named(name), PlanDifferenceModel::kDifference).data(PlanDifferenceModel::kDifferenceRole).toDouble(); };
    const planner::RankMemory& tight_a = a.memory.tightest();
    const planner::RankMemory& tight_b = b.memory.tightest();
    const auto activations = MemoryCategory::activations;
    QCOMPARE(difference("activations"), static_cast<double>(tight_b.bytes[activations].device - tight_a.bytes[activations].device));
    QCOMPARE(model.index(row_named("activations"), PlanDifferenceModel::kPlanA).data().toString(), bytes_text(tight_a.bytes[activations].device));
    QCOMPARE(difference("device total"), static_cast<double>(tight_b.device_total - tight_a.device_total));
    QCOMPARE(difference("exposed communication"), b.simulation.breakdown.communication_s - a.simulation.breakdown.communication_s);
    QCOMPARE(difference("pipeline bubble"), b.simulation.breakdown.bubble_s - a.simulation.breakdown.bubble_s);
    QCOMPARE(difference("optimizer"), b.simulation.breakdown.optimizer_s - a.simulation.breakdown.optimizer_s);
    QCOMPARE(difference("offload"), b.simulation.breakdown.offload_s - a.simulation.breakdown.offload_s);
    const auto compute = [](const planner::StepBreakdown& s) { return s.forward_s + s.backward_s + s.recompute_s; };
    QCOMPARE(difference("compute (forward, backward, recompute)"), compute(b.simulation.breakdown) - compute(a.simulation.breakdown));
    QCOMPARE(difference("step time"), b.simulation.step_time_s - a.simulation.step_time_s);
    QCOMPARE(difference("tokens/s"), b.simulation.tokens_per_s - a.simulation.tokens_per_s);
    // A is faster: B's lower tokens/s is a cost (red), its longer step too.
    QVERIFY(difference("tokens/s") < 0);
    const QColor red(0xB0, 0x1E, 0x1E);
    QCOMPARE(model.index(row_named("tokens/s"), PlanDifferenceModel::kDifference).data(Qt::ForegroundRole).value<QBrush>().color(), red);
    QCOMPARE(model.index(row_named("step time"), PlanDifferenceModel::kDifference).data(Qt::ForegroundRole).value<QBrush>().color(), red);
    // A category neither plan has is left out (no gathered chunks here).
    QCOMPARE(row_named("chunk_buffers"), -1);
    model.setPlans(std::nullopt, std::nullopt);
    QCOMPARE(model.rowCount(), 0);
  }

  // D22: every group of a mesh axis has its own colour, 16 or 256 of them as well as 8,
  // and the legend says how the colours are given where it cannot name them all.
  void meshGroupsEachHaveAColour() {
    for (int64_t groups : {2, 8, 12, 16, 256}) {
      QSet<QRgb> colours;
      for (int64_t g = 0; g < groups; ++g) colours.insert(group_colour(g, groups).rgb());
      QCOMPARE(colours.size(), static_cast<qsizetype>(groups));
    }
    QCOMPARE(group_legend(QStringLiteral("data"), 12).size(), size_t{12});
    QCOMPARE(group_legend(QStringLiteral("data"), 12).back().label, QStringLiteral("data group 11"));
    const auto ramp = group_legend(QStringLiteral("data"), 256);
    QCOMPARE(ramp.size(), size_t{4});
    QCOMPARE(ramp[1].label, QStringLiteral("data group 128"));
    QCOMPARE(ramp[1].color, group_colour(128, 256));
    QCOMPARE(ramp.back().label, QStringLiteral("… 256 groups, coloured in order from group 0 to group 255"));
  }

  void comparisonModelShowsEachCategory() {
    ComparisonModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    MemoryBreakdown predicted, measured;
    predicted.add(MemoryCategory::activations, MemorySpace::device, 110);
    measured.add(MemoryCategory::activations, MemorySpace::device, 100);
    model.setRanks({planner::RankComparison{0, planner::compare_memory(predicted, measured)}});
    QCOMPARE(model.rowCount(), kNumMemoryCategories);
    QCOMPARE(model.rankCount(), 1);
    const int row = static_cast<int>(MemoryCategory::activations);
    QCOMPARE(model.index(row, ComparisonModel::kError).data().toString(), QStringLiteral("10.0%"));
    QCOMPARE(model.index(row, ComparisonModel::kCategory).data().toString(), QStringLiteral("activations"));
  }

  // Several ranks: every rank's categories in turn, each row naming its rank.
  void comparisonModelShowsEachRanksCategories() {
    ComparisonModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    MemoryBreakdown predicted, measured, measured_off;
    predicted.add(MemoryCategory::activations, MemorySpace::device, 110);
    measured.add(MemoryCategory::activations, MemorySpace::device, 110);
    measured_off.add(MemoryCategory::activations, MemorySpace::device, 100);
    model.setRanks({planner::RankComparison{0, planner::compare_memory(predicted, measured)},
                    planner::RankComparison{1, planner::compare_memory(predicted, measured_off)}});
    QCOMPARE(model.rowCount(), 2 * kNumMemoryCategories);
    QCOMPARE(model.rankCount(), 2);
    const int activations = static_cast<int>(MemoryCategory::activations);
    QCOMPARE(model.index(activations, ComparisonModel::kRank).data().toString(), QStringLiteral("0"));
    QCOMPARE(model.index(activations, ComparisonModel::kError).data().toString(), QStringLiteral("0.0%"));
    const int rank1_activations = kNumMemoryCategories + activations;
    QCOMPARE(model.index(rank1_activations, ComparisonModel::kRank).data().toString(), QStringLiteral("1"));
    QCOMPARE(model.index(rank1_activations, ComparisonModel::kCategory).data().toString(), QStringLiteral("activations"));
    QCOMPARE(model.index(rank1_activations, ComparisonModel::kError).data().toString(), QStringLiteral("10.0%"));
  }
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::ModelsTest)
#include "gui_models_test.moc"

// The views added in the window's second pass, under the offscreen platform:
// memory over one step and two plans side by side, with the planner's numbers.
#include <cmath>

#include <QComboBox>
#include <QStandardPaths>
#include <QTest>

#include "category_style.h"
#include "gui_test_util.h"
#include "memory_timeline_chart.h"
#include "memory_timeline_view.h"
#include "plan_comparison_view.h"
#include "plan_difference_model.h"
#include "tessera/planner/report.h"

namespace tessera::gui {

class ViewsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  // The tightest rank row first; its highest point is the memory estimate's total; every row can be chosen.
  void memoryOverAStepShowsEachRankRowOfThePlan() {
    MainWindow window(StartState::defaults);
    window.resize(1280, 720);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
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
    window.resize(1280, 720);
    window.show();
    QVERIFY(test::wait_for_search(window.session()));
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
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::ViewsTest)
#include "gui_views_test.moc"

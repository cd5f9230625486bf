// What the PDF report says in words, from the session: the first page's inputs
// (model and its parameter count, cluster, batch, sequence, precision,
// optimizer, activation profile, the search's filters), the verdict on the plan
// in view, the search's summary and the assumptions with their sources; and any
// item model (the ranked plans, a comparison) as the rows of a printed table.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <QString>
#include <QStringList>

#include "planner_session.h"

class QAbstractItemModel;

namespace tessera::gui {

struct ReportContents {
  QString title;                                       // "Llama-2-13b on 16 × h100-80g"
  std::vector<std::pair<QString, QString>> inputs;     // label, value
  QString verdict;                                     // "FITS: ..." and the plan
  bool fits = false;
  QString search_summary;                              // "474 candidates searched: 393 fit, 150 distinct plans"
  std::vector<std::pair<QString, QString>> assumptions;  // "CUDA context: 512.0 MiB", its source
};

// Refused while an input is invalid or no plan is shown.
Result<ReportContents> report_contents(const PlannerSession& session);

struct PrintedTable {
  QString title;
  QStringList header;
  std::vector<QStringList> rows;
};

// The display text of `model`'s `columns`, for the rows `keep` accepts (every row when empty).
PrintedTable printed_table(const QString& title, const QAbstractItemModel& model, const std::vector<int>& columns,
                           const std::function<bool(int row)>& keep = {});

}  // namespace tessera::gui

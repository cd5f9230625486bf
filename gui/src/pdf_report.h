// The PDF report: a first page with the inputs, the verdict, the search's
// summary and the assumptions; then tables (every ranked plan, a comparison)
// printed as text across as many pages as they need; then one page per view,
// drawn from the view's printable part (no scroll bars, buttons or mouse hints).
#pragma once

#include <variant>
#include <vector>

#include <QString>

#include "report_contents.h"

class QWidget;

namespace tessera::gui {

struct PrintedView {
  QString title;
  QWidget* widget = nullptr;  // drawn at its size, scaled to the page
};

using PrintedPage = std::variant<PrintedTable, PrintedView>;

Status write_pdf_report(const ReportContents& contents, const std::vector<PrintedPage>& pages, const QString& path);

}  // namespace tessera::gui

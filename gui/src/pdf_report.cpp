#include "pdf_report.h"

#include <algorithm>

#include <QBuffer>
#include <QMarginsF>
#include <QPageLayout>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QPicture>
#include <QWidget>

#include "save_whole_file.h"

namespace tessera::gui {

namespace {

const QColor kFitsColour(0x1B, 0x7F, 0x3B), kOverColour(0xB0, 0x1E, 0x1E), kShade(0xF2, 0xF2, 0xF2);

// Where the next line goes; a new page when the page is full.
class PageCursor {
 public:
  PageCursor(QPdfWriter& pdf, QPainter& painter) : pdf_(pdf), painter_(painter), page_(pdf.pageLayout().paintRectPixels(pdf.resolution())) {}

  double width() const { return page_.width(); }
  double top() const { return y_; }
  double room() const { return page_.height() - y_; }
  void advance(double height) { y_ += height; }
  void newPage() {
    pdf_.newPage();
    y_ = 0;
  }
  void ensure(double height) {
    if (y_ > 0 && height > room()) newPage();
  }
  // Wrapped text at the cursor; returns its height.
  double text(const QString& text, const QFont& font, const QColor& colour = Qt::black, double indent = 0) {
    painter_.setFont(font);
    painter_.setPen(colour);
    const QRectF area(indent, 0, width() - indent, 1e6);
    const double height = painter_.boundingRect(area, Qt::TextWordWrap, text).height();
    ensure(height);
    painter_.drawText(QRectF(indent, y_, width() - indent, height), Qt::TextWordWrap, text);
    y_ += height;
    return height;
  }

 private:
  QPdfWriter& pdf_;
  QPainter& painter_;
  QRect page_;
  double y_ = 0;
};

QFont sized(double points, bool bold = false) {
  QFont font(QStringLiteral("DejaVu Sans"));
  font.setPointSizeF(points);
  font.setBold(bold);
  return font;
}

void write_first_page(PageCursor& cursor, QPainter& painter, const ReportContents& c) {
  cursor.text(QObject::tr("Tessera plan report: %1").arg(c.title), sized(16, true));
  cursor.advance(20);
  cursor.text(QObject::tr("Inputs"), sized(11, true));
  const QFont body = sized(9);
  painter.setFont(body);
  double label_width = 0;
  for (const auto& [label, value] : c.inputs) label_width = std::max<double>(label_width, painter.fontMetrics().horizontalAdvance(label));
  for (const auto& [label, value] : c.inputs) {
    const double top = cursor.top();
    cursor.text(value, body, Qt::black, label_width + 24);
    painter.setPen(QColor(0x44, 0x44, 0x44));
    painter.drawText(QRectF(0, top, label_width, painter.fontMetrics().height()), Qt::AlignLeft, label);
  }
  cursor.advance(16);
  cursor.text(QObject::tr("Verdict"), sized(11, true));
  const QStringList verdict = c.verdict.split('\n');
  cursor.text(verdict.front(), sized(9, true), c.fits ? kFitsColour : kOverColour);
  for (qsizetype i = 1; i < verdict.size(); ++i) cursor.text(verdict[i], body);
  if (!c.search_summary.isEmpty()) cursor.text(c.search_summary, body);
  cursor.advance(16);
  cursor.text(QObject::tr("Assumptions"), sized(11, true));
  for (const auto& [line, source] : c.assumptions) {
    cursor.text(line, body);
    cursor.text(source, sized(8), QColor(0x55, 0x55, 0x55), 24);
  }
}

// Column widths from the widest cell of each column; the widest column gives up what the page lacks.
std::vector<double> column_widths(QPainter& painter, const PrintedTable& table, double page_width) {
  constexpr double kPad = 16;
  std::vector<double> widths(static_cast<size_t>(table.header.size()), 0);
  const QFontMetricsF header_metrics(sized(8, true), painter.device());
  for (qsizetype c = 0; c < table.header.size(); ++c) widths[static_cast<size_t>(c)] = header_metrics.horizontalAdvance(table.header[c]) + kPad;
  for (const QStringList& row : table.rows) {
    for (qsizetype c = 0; c < row.size() && c < table.header.size(); ++c) {
      widths[static_cast<size_t>(c)] = std::max<double>(widths[static_cast<size_t>(c)], painter.fontMetrics().horizontalAdvance(row[c]) + kPad);
    }
  }
  double total = 0;
  for (double w : widths) total += w;
  if (total > page_width) {
    auto widest = std::max_element(widths.begin(), widths.end());
    *widest = std::max(60.0, *widest - (total - page_width));
  }
  return widths;
}

void draw_row(QPainter& painter, double top, double height, const QStringList& cells, const std::vector<double>& widths) {
  double x = 0;
  for (size_t c = 0; c < widths.size() && c < static_cast<size_t>(cells.size()); ++c) {
    const QString text = painter.fontMetrics().elidedText(cells[static_cast<qsizetype>(c)], Qt::ElideRight, static_cast<int>(widths[c] - 12));
    painter.drawText(QRectF(x + 4, top, widths[c] - 8, height), Qt::AlignLeft | Qt::AlignVCenter, text);
    x += widths[c];
  }
}

void write_table(PageCursor& cursor, QPainter& painter, const PrintedTable& table) {
  const QFont header = sized(8, true), body = sized(8);
  painter.setFont(body);
  const std::vector<double> widths = column_widths(painter, table, cursor.width());
  const double row_height = painter.fontMetrics().height() * 1.35;
  size_t next = 0;
  bool continued = false;
  do {
    cursor.newPage();
    cursor.text(continued ? QObject::tr("%1 (continued)").arg(table.title) : table.title, sized(12, true));
    cursor.advance(8);
    painter.setFont(header);
    painter.setPen(Qt::black);
    draw_row(painter, cursor.top(), row_height, table.header, widths);
    cursor.advance(row_height);
    painter.drawLine(QPointF(0, cursor.top()), QPointF(cursor.width(), cursor.top()));
    painter.setFont(body);
    for (; next < table.rows.size() && cursor.room() >= row_height; ++next) {
      if (next % 2 == 1) painter.fillRect(QRectF(0, cursor.top(), cursor.width(), row_height), kShade);
      draw_row(painter, cursor.top(), row_height, table.rows[next], widths);
      cursor.advance(row_height);
    }
    continued = true;
  } while (next < table.rows.size());
}

void write_view(PageCursor& cursor, QPainter& painter, const PrintedView& view) {
  cursor.newPage();
  cursor.text(view.title, sized(12, true));
  cursor.advance(8);
  // Recorded at the screen's resolution first: rendered straight onto the PDF,
  // the widget is scaled down by the ratio of the resolutions twice over.
  QWidget* widget = view.widget;
  QPicture picture;
  widget->render(&picture, QPoint(), QRegion(), QWidget::DrawChildren);
  const double scale = std::min(cursor.width() / widget->width(), cursor.room() / widget->height());
  // drawPicture scales by the two resolutions itself; the page's scale comes on top.
  const double resolutions = double(picture.logicalDpiX()) / painter.device()->logicalDpiX();
  painter.save();
  painter.translate(0, cursor.top());
  painter.scale(scale * resolutions, scale * resolutions);
  painter.drawPicture(QPointF(0, 0), picture);
  painter.restore();
}

}  // namespace

Status write_pdf_report(const ReportContents& contents, const std::vector<PrintedPage>& pages, const QString& path) {
  QByteArray bytes;  // written whole once finished (save_whole_file)
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  QPdfWriter pdf(&buffer);
  pdf.setPageLayout(QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Landscape, QMarginsF(12, 12, 12, 12), QPageLayout::Millimeter));
  pdf.setResolution(150);
  pdf.setTitle(QObject::tr("Tessera plan report: %1").arg(contents.title));
  pdf.setCreator(QStringLiteral("tessera-gui"));
  QPainter painter;
  if (!painter.begin(&pdf)) return write_error(path, QObject::tr("the PDF cannot be opened"));
  painter.setRenderHint(QPainter::Antialiasing);
  PageCursor cursor(pdf, painter);
  write_first_page(cursor, painter, contents);
  for (const PrintedPage& page : pages) {
    if (const auto* table = std::get_if<PrintedTable>(&page)) write_table(cursor, painter, *table);
    else write_view(cursor, painter, std::get<PrintedView>(page));
  }
  if (!painter.end()) return write_error(path, QObject::tr("the PDF could not be finished"));
  return save_whole_file(path, bytes.toStdString());
}

}  // namespace tessera::gui

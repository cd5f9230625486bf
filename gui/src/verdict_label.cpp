#include "verdict_label.h"

#include <cmath>

#include <QEvent>
#include <QPainter>
#include <QTextOption>

namespace tessera::gui {

VerdictLabel::VerdictLabel(QWidget* parent) : QWidget(parent) {
  QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);
  setSizePolicy(policy);
}

void VerdictLabel::setVerdict(const QString& lead, const QColor& colour, const QString& rest) {
  setContents(rest.isEmpty() ? lead : lead + QLatin1Char(' ') + rest, static_cast<int>(lead.size()), colour);
}

void VerdictLabel::setPlainText(const QString& text) { setContents(text, 0, QColor()); }

void VerdictLabel::setContents(QString text, int lead_length, const QColor& colour) {
  if (text == text_ && lead_length == lead_length_ && colour == lead_colour_) return;
  text_ = std::move(text);
  lead_length_ = lead_length;
  lead_colour_ = colour;
  laid_out_width_ = -1;
  updateGeometry();  // it may wrap to another number of lines
  update();
}

int VerdictLabel::layOut(int width) const {
  if (width == laid_out_width_) return laid_out_height_;
  layout_.clearLayout();
  layout_.setText(text_);
  layout_.setFont(font());
  QTextOption option;
  option.setWrapMode(QTextOption::WordWrap);
  layout_.setTextOption(option);
  QList<QTextLayout::FormatRange> formats;
  if (lead_length_ > 0) {
    QTextCharFormat lead;
    lead.setFontWeight(QFont::Bold);
    lead.setForeground(lead_colour_);
    formats.append({0, lead_length_, lead});
  }
  layout_.setFormats(formats);
  layout_.beginLayout();
  qreal y = 0;
  for (QTextLine line = layout_.createLine(); line.isValid(); line = layout_.createLine()) {
    line.setLineWidth(width);
    line.setPosition(QPointF(0, y));
    y += line.height();
  }
  layout_.endLayout();
  laid_out_width_ = width;
  laid_out_height_ = text_.isEmpty() ? 0 : static_cast<int>(std::ceil(y));
  return laid_out_height_;
}

int VerdictLabel::heightForWidth(int width) const { return layOut(width); }

QSize VerdictLabel::sizeHint() const {
  const int width = std::max(this->width(), 200);
  return {width, heightForWidth(width)};
}

QSize VerdictLabel::minimumSizeHint() const { return {0, text_.isEmpty() ? 0 : fontMetrics().height()}; }

void VerdictLabel::paintEvent(QPaintEvent*) {
  if (text_.isEmpty()) return;
  layOut(width());
  QPainter p(this);
  p.setPen(palette().color(QPalette::WindowText));
  layout_.draw(&p, QPointF(0, 0));
}

void VerdictLabel::changeEvent(QEvent* event) {
  if (event->type() == QEvent::FontChange) {
    laid_out_width_ = -1;
    updateGeometry();
    update();
  }
  QWidget::changeEvent(event);
}

}  // namespace tessera::gui

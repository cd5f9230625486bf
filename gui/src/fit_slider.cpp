#include "fit_slider.h"

#include <QPainter>
#include <QStyle>
#include <QStyleOptionSlider>

namespace tessera::gui {

namespace {

const QColor kOverCapacity(0xB0, 0x1E, 0x1E);
const QColor kFitMark(0x1B, 0x7F, 0x3B);

}  // namespace

FitSlider::FitSlider(QWidget* parent) : QSlider(Qt::Horizontal, parent) {}

void FitSlider::setFitLimit(std::optional<int> value) {
  if (value == fit_limit_) return;
  fit_limit_ = value;
  update();
}

void FitSlider::paintEvent(QPaintEvent* event) {
  QSlider::paintEvent(event);
  if (!fit_limit_ || *fit_limit_ >= maximum()) return;  // everything the slider offers fits
  QStyleOptionSlider option;
  initStyleOption(&option);
  const QRect groove = style()->subControlRect(QStyle::CC_Slider, &option, QStyle::SC_SliderGroove, this);
  const QRect handle = style()->subControlRect(QStyle::CC_Slider, &option, QStyle::SC_SliderHandle, this);
  // The handle's centre travels over the groove less one handle width.
  const int span = groove.width() - handle.width();
  const auto x_of = [&](int value) {
    return groove.left() + handle.width() / 2 + QStyle::sliderPositionFromValue(minimum(), maximum(), value, span);
  };
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const double limit_x = *fit_limit_ < minimum() ? groove.left() : x_of(*fit_limit_);
  QColor tint = kOverCapacity;
  tint.setAlpha(110);
  p.fillRect(QRectF(limit_x, groove.center().y() - 2, groove.right() - limit_x, 5), tint);
  if (*fit_limit_ >= minimum()) {
    p.setPen(QPen(kFitMark, 2));
    p.drawLine(QPointF(limit_x, groove.top()), QPointF(limit_x, groove.bottom()));
  }
}

}  // namespace tessera::gui

// One per-step series of a measured run as a line over the step number (loss,
// gradient norm): a value axis with 1, 2 or 5 × 10^k ticks, steps across, a
// gap where a step has no value (a skipped fp16 step's NaN norm).
#pragma once

#include <vector>

#include <QColor>
#include <QString>
#include <QWidget>

namespace tessera::gui {

class SeriesChart : public QWidget {
  Q_OBJECT

 public:
  SeriesChart(QString title, QColor colour, QWidget* parent = nullptr);

  // values[i] is step first_step + i.
  void setSeries(std::vector<double> values, int first_step = 1);
  const std::vector<double>& series() const { return values_; }

  QSize sizeHint() const override { return {420, 260}; }
  QSize minimumSizeHint() const override { return {240, 160}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QString title_;
  QColor colour_;
  std::vector<double> values_;
  int first_step_ = 1;
};

}  // namespace tessera::gui

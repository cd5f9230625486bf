// A power-of-two slider that marks the largest position at which the plan in
// view still fits: a tick there, and the groove beyond it tinted red.
#pragma once

#include <optional>

#include <QSlider>

namespace tessera::gui {

class FitSlider : public QSlider {
  Q_OBJECT

 public:
  explicit FitSlider(QWidget* parent = nullptr);

  // The largest slider value that fits; below the minimum: none fits; empty: nothing marked (no plan).
  void setFitLimit(std::optional<int> value);
  std::optional<int> fitLimit() const { return fit_limit_; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  std::optional<int> fit_limit_;
};

}  // namespace tessera::gui

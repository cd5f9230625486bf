// The simulated step as a timeline: per pipeline stage a compute lane with
// every forward (F) and backward (B) micro-batch, and a communication lane
// beneath it (activations received from the neighbouring stage, gradient
// reduction, offload, optimizer, each pass's exposed tensor-parallel calls). A
// pipeline's idle compute between passes is hatched, so the bubbles stand out.
// The wheel zooms around the pointer, dragging pans, a double click fits.
#pragma once

#include <optional>

#include <QRectF>
#include <QStringList>
#include <QWidget>

#include "planner_session.h"

namespace tessera::gui {

class PipelineCanvas;

class PipelineView : public QWidget {
  Q_OBJECT

 public:
  explicit PipelineView(QWidget* parent = nullptr);

  void setPlan(std::shared_ptr<const ShownPlan> plan);
  void clearPlan();
  void zoomIn();
  void zoomOut();
  void fit();
  // The visible time range in seconds, for tests.
  std::pair<double, double> visibleRange() const;
  // Whether the canvas is tall enough for every stage's lanes and the legend (it scrolls where the tab is shorter).
  bool showsEveryStage() const;
  // The schedule itself, without the buttons and scroll bar around it: what a report prints.
  QWidget* canvas() const;
  // What the canvas writes above the lanes and in its legend, and where it last drew
  // the shown plan's event `index` (empty when it did not), for tests.
  QString summaryText() const;
  QStringList legendLabels() const;
  QRectF eventBox(size_t index) const;

 private:
  PipelineCanvas* canvas_ = nullptr;
};

}  // namespace tessera::gui

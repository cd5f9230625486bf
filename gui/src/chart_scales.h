// What the charts share: tick steps for byte and time axes, and the colours of
// the simulator's trace events (forward, backward, communication, ...).
#pragma once

#include <string>
#include <utility>

#include <QColor>
#include <QString>

namespace tessera::gui {

// A tick step of 1, 2 or 5 × 10^k GiB (or MiB below 1 GiB) giving at most 8 ticks up to `max_bytes`, and its unit.
std::pair<double, QString> byte_tick_step(double max_bytes);
// A tick step of 1, 2 or 5 × 10^k giving at most `max_ticks` ticks over `span` (seconds, a loss, ...).
double tick_step(double span, int max_ticks = 10);
// The unit a time axis with ticks `step_s` apart is labelled in, and seconds per that unit: ("ms", 1e-3).
std::pair<QString, double> time_tick_unit(double step_s);

// A trace event's colour by its category ("forward", "backward", "optimizer", "offload"; communication otherwise).
QColor trace_event_colour(const std::string& category);

}  // namespace tessera::gui

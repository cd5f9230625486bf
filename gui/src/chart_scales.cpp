#include "chart_scales.h"

#include <algorithm>
#include <cmath>

namespace tessera::gui {

std::pair<double, QString> byte_tick_step(double max_bytes) {
  const bool gib = max_bytes >= double(1 << 30);
  const double unit = gib ? double(1 << 30) : double(1 << 20);
  const double span = max_bytes / unit;
  double step = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-9) / 8)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (step * m) <= 8) {
      step *= m;
      break;
    }
  }
  return {step * unit, gib ? QStringLiteral("GiB") : QStringLiteral("MiB")};
}

double tick_step(double span, int max_ticks) {
  const double base = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-12) / max_ticks)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (span / (base * m) <= max_ticks) return base * m;
  }
  return base * 10;
}

std::pair<QString, double> time_tick_unit(double step_s) {
  if (step_s >= 0.5) return {QStringLiteral("s"), 1};
  if (step_s >= 5e-4) return {QStringLiteral("ms"), 1e-3};
  return {QStringLiteral("µs"), 1e-6};
}

QColor trace_event_colour(const std::string& category) {
  if (category == "forward") return QColor(0x4C, 0x72, 0xB0);
  if (category == "backward") return QColor(0xDD, 0x84, 0x52);
  if (category == "optimizer") return QColor(0x55, 0xA8, 0x68);
  if (category == "offload") return QColor(0xC4, 0x4E, 0x52);
  return QColor(0x81, 0x72, 0xB3);  // communication
}

}  // namespace tessera::gui

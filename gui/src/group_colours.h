// The device mesh's colours for the groups of one axis (data, tensor or
// pipeline): up to 12 groups a colour each from a categorical palette, each
// named in the legend; more groups a ramp of hues in group order, so that no
// two groups share a colour and the legend names the ramp's ends and middle.
#pragma once

#include <cstdint>
#include <vector>

#include <QColor>
#include <QString>

#include "category_style.h"

namespace tessera::gui {

inline constexpr int64_t kDistinctGroupColours = 12;

// Group `index` of `groups` (0 <= index < groups).
QColor group_colour(int64_t index, int64_t groups);

// "data group 0", ... for each group, or for a ramp its first, middle and last
// group and a line saying the colours run in group order. `axis`: "data", "tensor", "pipeline".
std::vector<LegendEntry> group_legend(const QString& axis, int64_t groups);

}  // namespace tessera::gui

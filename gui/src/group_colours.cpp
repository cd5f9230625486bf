#include "group_colours.h"

#include <array>

#include <QObject>

namespace tessera::gui {

namespace {

// ColorBrewer Set3 (Harrower & Brewer 2003): light enough for black labels.
constexpr std::array<QRgb, kDistinctGroupColours> kPalette = {0x8DD3C7, 0xFFFFB3, 0xBEBADA, 0xFB8072, 0x80B1D3, 0xFDB462,
                                                              0xB3DE69, 0xFCCDE5, 0xD9D9D9, 0xBC80BD, 0xCCEBC5, 0xFFED6F};

}  // namespace

QColor group_colour(int64_t index, int64_t groups) {
  if (groups <= kDistinctGroupColours) return QColor(kPalette[static_cast<size_t>(index)]);
  // Red through violet (300° of hue, not back to red), light and soft like the palette.
  const double position = static_cast<double>(index) / static_cast<double>(groups - 1);
  return QColor::fromHsvF(static_cast<float>(position * 300.0 / 360.0), 0.45f, 0.97f);
}

std::vector<LegendEntry> group_legend(const QString& axis, int64_t groups) {
  std::vector<LegendEntry> entries;
  if (groups <= kDistinctGroupColours) {
    for (int64_t g = 0; g < groups; ++g) entries.push_back({group_colour(g, groups), QObject::tr("%1 group %2").arg(axis).arg(g)});
    return entries;
  }
  for (int64_t g : {int64_t{0}, groups / 2, groups - 1}) entries.push_back({group_colour(g, groups), QObject::tr("%1 group %2").arg(axis).arg(g)});
  entries.push_back({QColor(Qt::white), QObject::tr("… %1 groups, coloured in order from group 0 to group %2").arg(groups).arg(groups - 1)});
  return entries;
}

}  // namespace tessera::gui

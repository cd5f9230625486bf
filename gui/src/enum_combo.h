// A combo box over a planner enum: its items are the planner's spellings
// (enum_names), optionally led by "any" (no value), shared by the input panel
// and the layout editor.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <QComboBox>
#include <QObject>
#include <QString>

#include "tessera/planner/enum_names.h"

namespace tessera::gui {

inline QString enum_text(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

// A combo box of some of an enum's values, in the given order, by the
// planner's spellings (enum_name), optionally led by "any".
template <typename E>
inline QComboBox* enum_combo(QWidget* parent, bool with_any, std::span<const E> values) {
  auto* combo = new QComboBox(parent);
  if (with_any) combo->addItem(QObject::tr("any (search all)"), QString());
  for (E value : values) combo->addItem(enum_text(enum_name(value)), enum_text(enum_name(value)));
  return combo;
}

// The same over every value of the enum.
template <typename E>
inline QComboBox* enum_combo(QWidget* parent, bool with_any) {
  std::vector<E> values;
  for (const auto& entry : enum_names(E{})) values.push_back(entry.value);
  return enum_combo<E>(parent, with_any, values);
}

template <typename E>
inline std::optional<E> combo_enum(const QComboBox* combo) {
  return parse_enum<E>(combo->currentData().toString().toStdString());
}

template <typename E>
inline void set_combo_enum(QComboBox* combo, std::optional<E> value) {
  combo->setCurrentIndex(std::max(0, combo->findData(value ? enum_text(enum_name(*value)) : QString())));
}

}  // namespace tessera::gui

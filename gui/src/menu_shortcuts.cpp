#include "menu_shortcuts.h"

#include <QAction>
#include <QKeyEvent>
#include <QWidget>

namespace tessera::gui {

void MenuShortcuts::watch(QWidget* editor) {
  editor->installEventFilter(this);
  for (QWidget* child : editor->findChildren<QWidget*>()) child->installEventFilter(this);
}

bool MenuShortcuts::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() != QEvent::ShortcutOverride) return QObject::eventFilter(watched, event);
  const auto* key = static_cast<QKeyEvent*>(event);
  const QKeySequence pressed(key->keyCombination());
  for (const QAction* action : actions_) {
    if (!action->shortcuts().contains(pressed)) continue;
    event->ignore();  // not overridden: the shortcut map triggers the action
    return true;
  }
  return QObject::eventFilter(watched, event);
}

}  // namespace tessera::gui

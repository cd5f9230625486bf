// Keeps the window's menu shortcuts working while a text field has focus.
// Qt's line edits claim Emacs keys through ShortcutOverride (Ctrl+E moves to
// the end of the line on X11), which would swallow File → Export while a spin
// box is being edited. The watched editors give those keys back to the menu.
#pragma once

#include <QList>
#include <QObject>

class QAction;
class QWidget;

namespace tessera::gui {

class MenuShortcuts : public QObject {
  Q_OBJECT

 public:
  explicit MenuShortcuts(QObject* parent = nullptr) : QObject(parent) {}

  void addAction(QAction* action) { actions_.push_back(action); }
  // `editor` and every widget inside it stop overriding the actions' shortcuts.
  void watch(QWidget* editor);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QList<QAction*> actions_;
};

}  // namespace tessera::gui

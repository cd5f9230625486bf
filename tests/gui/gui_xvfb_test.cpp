// The real window on an X server (run under xvfb-run with QT_QPA_PLATFORM=xcb):
// it opens, is exposed, resizes, and closes cleanly; menu shortcuts work with
// X11's key bindings, under which line edits claim Emacs keys such as Ctrl+E.
#include <QAction>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTest>

#include "gui_test_util.h"

namespace tessera::gui {

class XvfbWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void opensResizesAndCloses() {
    MainWindow window(StartState::defaults);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QVERIFY(test::wait_for_search(window.session()));
    for (QSize size : {QSize(1920, 1080), QSize(1280, 800), QSize(1024, 700)}) {
      window.resize(size);
      QTRY_COMPARE(window.size(), size);
      for (View view : kAllViews) {
        window.showView(view);
        QCoreApplication::processEvents();
      }
    }
    QVERIFY(window.close());
    QTRY_VERIFY(!window.isVisible());
  }

  // D2: Ctrl+E exports while a spin box is being edited (not the line edit's "end of line").
  void ctrlEExportsFromASpinBox() {
    MainWindow window(StartState::defaults);
    window.show();
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    QVERIFY(test::wait_for_search(window.session()));
    QObject::disconnect(window.exportAction(), &QAction::triggered, nullptr, nullptr);  // no modal file dialog in a test
    QSignalSpy exported(window.exportAction(), &QAction::triggered);
    window.inputPanel()->globalBatchBox()->setFocus();
    QTest::keyClick(window.inputPanel()->globalBatchBox(), Qt::Key_E, Qt::ControlModifier);
    QCOMPARE(exported.count(), 1);
  }
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::XvfbWindowTest)
#include "gui_xvfb_test.moc"

// The real window on an X server (run under xvfb-run with QT_QPA_PLATFORM=xcb):
// it opens, is exposed, resizes, and closes cleanly.
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
};

}  // namespace tessera::gui

QTEST_MAIN(tessera::gui::XvfbWindowTest)
#include "gui_xvfb_test.moc"

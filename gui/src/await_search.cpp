#include "await_search.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEventLoop>

namespace tessera::gui {

bool await_search(const PlannerSession& session, int timeout_ms) {
  QElapsedTimer waited;
  waited.start();
  QCoreApplication::processEvents();
  while (session.searching() && waited.elapsed() < timeout_ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  QCoreApplication::processEvents();  // what the delivery starts: the views' repaint, the fit limits
  return !session.searching();
}

}  // namespace tessera::gui

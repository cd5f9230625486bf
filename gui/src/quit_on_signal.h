// SIGTERM, SIGINT and SIGHUP close the window like its close button does (the
// window state is saved, the exit status is 0) instead of killing the process
// mid-paint. Signal handlers may not call Qt, so the handler only writes a byte
// to a socket pair that a QSocketNotifier reads on the event loop (the Qt
// documentation's "Calling Qt Functions From Unix Signal Handlers").
#pragma once

#include <QObject>

namespace tessera::gui {

// Installs the handlers; `parent` owns the notifier. Returns false (and leaves
// the default handlers) when the socket pair cannot be made.
bool quit_on_termination_signals(QObject* parent);

}  // namespace tessera::gui

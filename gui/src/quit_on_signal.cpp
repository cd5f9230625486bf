#include "quit_on_signal.h"

#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include <QApplication>
#include <QSocketNotifier>

namespace tessera::gui {
namespace {

int signal_socket[2] = {-1, -1};  // [0]: written by the handler, [1]: read on the event loop

extern "C" void on_termination_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t written = ::write(signal_socket[0], &byte, 1);  // async-signal-safe
}

}  // namespace

bool quit_on_termination_signals(QObject* parent) {
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, signal_socket) != 0) return false;
  auto* notifier = new QSocketNotifier(signal_socket[1], QSocketNotifier::Read, parent);
  QObject::connect(notifier, &QSocketNotifier::activated, parent, [notifier] {
    notifier->setEnabled(false);
    char byte = 0;
    [[maybe_unused]] const ssize_t read = ::read(signal_socket[1], &byte, 1);
    QApplication::closeAllWindows();  // each window's closeEvent saves its state
    QApplication::quit();
  });
  struct sigaction action = {};
  action.sa_handler = on_termination_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal, &action, nullptr);
  return true;
}

}  // namespace tessera::gui

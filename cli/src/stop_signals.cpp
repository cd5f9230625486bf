#include "stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace tessera::cli {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
constexpr int kCount = sizeof kStopSignals / sizeof kStopSignals[0];

// A signal handler can reach only static storage: this is the one place the
// program keeps such state, written by the handler and read by the run.
volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous[kCount];

void on_stop_signal(int signal_number) {
  if (g_received != 0) {
    // The second signal: leave now (write and _exit are async-signal-safe).
    const char message[] = "tessera: second signal: exiting at once; the last committed checkpoint is kept\n";
    [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(128 + signal_number);
  }
  g_received = signal_number;
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  for (int i = 0; i < kCount; ++i) {
    sigaction(kStopSignals[i], nullptr, &g_previous[i]);
    if (g_previous[i].sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // reads and writes in progress go on; the loop polls the flag
    sigaction(kStopSignals[i], &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < kCount; ++i) sigaction(kStopSignals[i], &g_previous[i], nullptr);
}

int StopSignals::received() const { return g_received; }

const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "a signal";
  }
}

}  // namespace tessera::cli

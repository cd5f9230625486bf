// SIGINT, SIGTERM, SIGHUP and SIGPIPE while `tessera train` runs: the first one
// asks the run to stop (it abandons the step in progress, commits the last
// complete one, writes metrics.json and exits with 128 + the signal's number);
// a second one ends the process at once, which the checkpoint protocol makes
// safe (the committed checkpoint is never touched by a save in progress).
// Signals that were ignored when tessera started (nohup, background jobs of a
// non-interactive shell) stay ignored.
#pragma once

namespace tessera::cli {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received, 0 when none.
  int received() const;
};

// "SIGTERM" for SIGTERM, and so on for the four above.
const char* signal_name(int signal_number);

}  // namespace tessera::cli

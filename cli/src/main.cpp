// tessera: the command-line front end. All work happens in run_cli(); main only
// makes sure that no exception ever ends the program with an abort: each
// becomes one line on stderr, exit code 2 for what the user can act on (out of
// memory, I/O) and 1 for an internal error.
#include <exception>
#include <iostream>
#include <new>

#include "cli_app.h"
#include "tessera/planner/text_util.h"

namespace {

int report(const char* kind, const char* what, int code) {
  std::cerr << "tessera: " << kind << ": " << tessera::planner::one_line(what, 300) << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return tessera::cli::run_cli(argc, argv, std::cout, std::cerr);
  } catch (const std::bad_alloc& e) {
    return report("error", (std::string("out of memory (") + e.what() + "); a smaller model, micro-batch or sequence needs less").c_str(),
                  tessera::cli::kExitUsage);
  } catch (const std::ios_base::failure& e) {
    return report("error", (std::string("I/O error: ") + e.what()).c_str(), tessera::cli::kExitUsage);
  } catch (const std::exception& e) {
    return report("internal error", (std::string(e.what()) + " (please report this)").c_str(), 1);
  } catch (...) {
    return report("internal error", "an unknown exception (please report this)", 1);
  }
}

// tessera: the command-line front end. All work happens in run_cli().
#include <iostream>

#include "cli_app.h"

int main(int argc, char** argv) { return tessera::cli::run_cli(argc, argv, std::cout, std::cerr); }

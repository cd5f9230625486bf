#include "export_command.h"

#include <ostream>

#include "cli_app.h"
#include "cli_util.h"
#include "commands.h"
#include "tessera/planner/export.h"
#include "tessera/planner/plan_file.h"

namespace tessera::cli {

using namespace tessera::planner;

void add_export_options(CLI::App& c, ExportOptions& o) {
  c.add_option("plan_file", o.plan_file, "plan.json written by `tessera plan`")->required();
  // Checked in run_export, so that the message lists the targets in one line.
  c.add_option("--to", o.to, "colossalai (a training script), deepspeed (ds_config.json), megatron (a launch script of Megatron-LM; --runtime megatron plans), torchtitan (a TOML job config; --runtime torchtitan plans) or perfetto (a trace of one step)")->required();
  c.add_option("--plan", o.plan, "Which plan of the file: 1 is the best")->capture_default_str();
  c.add_option("--output,-o", o.output, "Write here instead of standard output");
}

int run_export(const ExportOptions& options, std::ostream& out, std::ostream& err) {
  ExportTarget target{};
  if (Status s = parse_choice("--to", options.to, target); !s) return fail(err, s.error().message);
  if (options.plan < 1) return fail(err, "--plan must be a positive integer (1 is the best plan), got " + std::to_string(options.plan));
  auto file = read_plan_file(options.plan_file);
  if (!file) {
    // Read errors name the "plan file"; parse errors start with the path.
    const std::string& message = file.error().message;
    return fail(err, message.starts_with("plan file") ? message : "plan file " + message);
  }
  auto text = export_plan(file.value(), static_cast<size_t>(options.plan - 1), target);
  if (!text) return fail(err, text.error().message);
  if (options.output.empty()) {
    out << text.value();
    return kExitOk;
  }
  if (Status s = write_file_atomically(options.output, text.value()); !s) return fail(err, s.error().message);
  out << "wrote " << options.output << "\n";
  return kExitOk;
}

}  // namespace tessera::cli

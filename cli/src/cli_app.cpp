#include "cli_app.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <limits>
#include <ostream>
#include <string>

#include "commands.h"
#include "compare_command.h"
#include "export_command.h"
#include "plan_command.h"
#include "train_command.h"
#include "usage_error.h"
#include "tessera/planner/text_util.h"

namespace tessera::cli {
namespace {

// CLI11 2.1 reads integers with strtoll/strtoull in base 0 (TypeTools.hpp,
// integral_conversion): text beyond the range saturates (--steps
// 9223372036854775808 became INT64_MAX), "-1" wraps to 2^64 - 1 for an
// unsigned option, and "010" reads as octal 8. This transform runs before that
// conversion: the text must be a decimal whole number in T's range, and CLI11
// is handed its canonical form. (An int option is narrower still: CLI11 itself
// refuses a value its int cannot hold, "Could not convert".)
template <typename T>
CLI::Validator whole_number() {
  const auto check = [](std::string& text) {
    T value{};
    const char* end = text.data() + text.size();
    if (const auto [stop, error] = std::from_chars(text.data(), end, value); error != std::errc() || stop != end) {
      const std::string quoted = "'" + planner::one_line(text, 40) + "' is not a whole number";
      // The range helps only where the text is written as a whole number (one beyond the range, or negative where it may not be).
      const size_t digits_from = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
      const bool written_as_whole_number = text.size() > digits_from && std::all_of(text.begin() + digits_from, text.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!written_as_whole_number) return quoted;
      return quoted + " in range " + std::to_string(std::numeric_limits<T>::min()) + " to " + std::to_string(std::numeric_limits<T>::max());
    }
    text = std::to_string(value);
    return std::string();
  };
  return CLI::Validator(check, "");
}

}  // namespace

void check_integer_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string full_type = option->get_type_name();  // "INT", or "INT:<a validator's description>"
    const std::string type = full_type.substr(0, full_type.find(':'));
    if (type == "INT") option->transform(whole_number<int64_t>());
    if (type == "UINT") option->transform(whole_number<uint64_t>());
  }
  for (CLI::App* command : app.get_subcommands(std::function<bool(CLI::App*)>())) check_integer_options(*command);
}

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"Tessera: plans the memory, layout and speed of large-model training.\n"
               "Start with `tessera models`, then `tessera plan --model gpt2-medium --gpus 8 --global-batch 64`."};
  app.name("tessera");
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", "tessera 0.1.0");

  ListOptions models_options, gpus_options;
  CLI::App* models = app.add_subcommand("models", "List the shipped models with their parameter counts");
  models->add_option("--format", models_options.format, "table or json")->check(CLI::IsMember({"table", "json"}));
  CLI::App* gpus = app.add_subcommand("gpus", "List the shipped GPU profiles");
  gpus->add_option("--format", gpus_options.format, "table or json")->check(CLI::IsMember({"table", "json"}));
  gpus->add_option("--profile", gpus_options.profile,
                   "Print one GPU's whole profile, a file for --gpu to start from (cpu: this host, as `tessera train` plans it)")
      ->excludes("--format");
  EstimateOptions estimate_options;
  CLI::App* estimate = app.add_subcommand("estimate", "Memory per rank and category for one training set-up");
  add_estimate_options(*estimate, estimate_options);
  PlanOptions plan_options;
  CLI::App* plan = app.add_subcommand("plan", "Search every plugin and layout, rank the ones that fit, write plan.json");
  add_plan_options(*plan, plan_options);
  ExportOptions export_options;
  CLI::App* export_command = app.add_subcommand("export", "Write one plan of plan.json as a ColossalAI script, a DeepSpeed config, a Megatron-LM launch, a torchtitan job config or a Perfetto trace");
  add_export_options(*export_command, export_options);
  TrainCliOptions train_options;
  CLI::App* train = app.add_subcommand("train", "Train a model on the CPU, or on GPUs with --gpu; write the planner's estimate and the measured metrics");
  add_train_options(*train, train_options);
  CompareCliOptions compare_options;
  CLI::App* compare = app.add_subcommand("compare", "Predicted against measured memory, per category");
  add_compare_options(*compare, compare_options);
  check_integer_options(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << "tessera: error: " << usage_error_message(app, e, argc, argv) << "\n";
    return kExitUsage;
  }
  if (models->parsed()) return run_models(models_options, out, err);
  if (gpus->parsed()) return run_gpus(gpus_options, out, err);
  if (plan->parsed()) return run_plan(plan_options, out, err);
  if (train->parsed()) {
    train_options.given = given_options(*train);
    return run_train(train_options, out, err);
  }
  if (compare->parsed()) return run_compare(compare_options, out, err);
  if (export_command->parsed()) return run_export(export_options, out, err);
  return run_estimate(estimate_options, out, err);
}

}  // namespace tessera::cli

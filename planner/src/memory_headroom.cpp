#include "tessera/planner/memory_headroom.h"

#include <cmath>
#include <stdexcept>

#include "tessera/planner/report.h"

namespace tessera::planner {

Status parse_memory_headroom(const std::string& text, Assumptions& assumptions) {
  const bool percent = text.ends_with("%");
  const std::string number = percent ? text.substr(0, text.size() - 1) : text;
  const Status refused = make_error(ErrorCode::invalid_argument, "--memory-headroom: '" + text +
                                                                     "' is not a size; give GiB from 0 to 1048576 (e.g. 2) or a percentage "
                                                                     "of the GPU below 100 (e.g. 10%)");
  if (number.empty() || number.find_first_not_of("0123456789.") != std::string::npos) return refused;  // no sign, exponent, inf or nan
  double value = 0;
  size_t used = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::invalid_argument&) {
    return refused;
  } catch (const std::out_of_range&) {
    return refused;
  }
  if (used != number.size() || value >= (percent ? 100.0 : 1048576.0)) return refused;
  assumptions.memory_headroom_bytes = percent ? 0 : static_cast<int64_t>(std::llround(value * 1073741824.0));
  assumptions.memory_headroom_fraction = percent ? value / 100 : 0;
  return Status::success();
}

Status check_memory_headroom(const Assumptions& assumptions, const GpuProfile& gpu) {
  const int64_t headroom = assumptions.memory_headroom(gpu.memory_bytes);
  if (headroom < gpu.memory_bytes) return Status::success();
  return make_error(ErrorCode::invalid_argument, "--memory-headroom " + format_bytes(headroom) + " is all of the " + gpu.name + "'s " +
                                                     format_bytes(gpu.memory_bytes) + " or more, which leaves no plan anything; give less (e.g. 10%)");
}

}  // namespace tessera::planner

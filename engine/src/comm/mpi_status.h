// An MPI return code as a Status. Private to the MPI backend.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>

#include "tessera/planner/status.h"

namespace tessera::engine::comm {

// comm_error "<call> failed: <MPI's text for the code>", e.g. "MPI_Irecv failed:
// MPI_ERR_TRUNCATE: message truncated".
inline Status mpi_status(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::success();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = std::snprintf(text, sizeof text, "MPI error %d", code);
  return make_error(ErrorCode::comm_error, std::string(call) + " failed: " + std::string(text, static_cast<size_t>(length)));
}

}  // namespace tessera::engine::comm

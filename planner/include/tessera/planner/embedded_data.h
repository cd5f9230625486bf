// The JSON files shipped in models/ and data/hardware/{gpus,clusters}/, compiled into the
// library by cmake/EmbedData.cmake. Read-only: the registry parses them on demand.
#pragma once

#include <string_view>
#include <vector>

namespace tessera::planner {

struct EmbeddedFile {
  std::string_view name;     // file name without ".json", e.g. "gpt2-medium"
  std::string_view content;  // the file's text
};

const std::vector<EmbeddedFile>& embedded_model_files();
const std::vector<EmbeddedFile>& embedded_gpu_files();
const std::vector<EmbeddedFile>& embedded_cluster_files();

}  // namespace tessera::planner

// The shipped models (models/*.json) and GPU profiles (data/hardware/gpus/*.json),
// compiled into the library. A model or GPU can also be given as a file path.
#pragma once

#include <string>
#include <vector>

#include "tessera/planner/cluster.h"
#include "tessera/planner/hardware.h"
#include "tessera/planner/model.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

std::vector<std::string> shipped_model_names();
std::vector<std::string> shipped_gpu_names();
std::vector<std::string> shipped_cluster_names();

// `name_or_path`: a shipped model's name ("gpt2-medium") or the path of a
// Hugging Face config.json. Errors name `field` (the option it came from).
Result<Model> load_model(const std::string& name_or_path, const std::string& field = "--model");

// The text of a model's config.json: the shipped file for a shipped name, else
// the file at the path. For exporters that hand the same config to transformers.
Result<std::string> model_config_text(const std::string& name_or_path, const std::string& field = "--model");

// `name_or_path`: a shipped GPU's name ("h100-80g") or the path of a profile.
Result<GpuProfile> load_gpu(const std::string& name_or_path, const std::string& field = "--gpu");

// `name_or_path`: a shipped cluster's name ("dgx-h100-ndr") or the path of a cluster file.
Result<ClusterSpec> load_cluster(const std::string& name_or_path, const std::string& field = "--cluster");

}  // namespace tessera::planner

// reference_dump CHECKPOINT_DIR OUT.safetensors [MICRO_BATCH SEQ]
//
// For tools/reference-check: loads a `tessera train` checkpoint (config.json,
// model.safetensors), runs one forward and backward on the first
// MICRO_BATCH·SEQ + 1 bytes of the shipped text, and writes the batch, the
// softmax probabilities, the loss and every parameter's gradient
// ("grad.<Hugging Face name>") to OUT.safetensors, for PyTorch to compare.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/data.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/safetensors.h"
#include "tessera/planner/model.h"

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc != 3 && argc != 5) {
    std::fprintf(stderr, "usage: reference_dump CHECKPOINT_DIR OUT.safetensors [MICRO_BATCH SEQ]\n");
    return 2;
  }
  const std::string dir = argv[1], out = argv[2];
  const int64_t B = argc == 5 ? std::atoll(argv[3]) : 2, T = argc == 5 ? std::atoll(argv[4]) : 32;
  auto config = planner::load_model_config_file(dir + "/config.json", "CHECKPOINT_DIR");
  if (!config) {
    std::fprintf(stderr, "reference_dump: %s\n", config.error().message.c_str());
    return 2;
  }
  const planner::Model model = planner::make_model(config.value());
  engine::MemoryLedger ledger;
  auto created = engine::Transformer<float>::create(model, ledger, B, T, 1);
  if (!created) {
    std::fprintf(stderr, "reference_dump: %s\n", created.error().message.c_str());
    return 2;
  }
  engine::Transformer<float> net = std::move(created).value();
  if (Status s = engine::load_model_weights(dir, net); !s) {
    std::fprintf(stderr, "reference_dump: %s\n", s.error().message.c_str());
    return 2;
  }
  auto data = engine::load_token_file(std::string(TESSERA_DATA_DIR) + "/text/kjv-genesis-exodus.txt");
  if (!data) return 2;
  engine::DataLoader loader(data.value(), B, T);
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  loader.next(tokens.data(), targets.data());
  net.zero_gradients();
  const float loss = static_cast<float>(net.forward(tokens.data(), targets.data()));
  const float* p = net.probabilities();  // read before backward turns them into dlogits
  const std::vector<float> probs(p, p + B * T * model.config.vocab_size);
  net.backward(1.0f);
  const std::vector<float> tokens_f(tokens.begin(), tokens.end()), targets_f(targets.begin(), targets.end());
  std::vector<engine::TensorView> views = {{"tokens", {B, T}, tokens_f.data()},
                                           {"targets", {B, T}, targets_f.data()},
                                           {"loss", {1}, &loss},
                                           {"probs", {B, T, model.config.vocab_size}, probs.data()}};
  std::vector<std::vector<float>> grads;
  for (auto& g : net.gradients()) grads.emplace_back(g.data(), g.data() + g.numel());
  std::vector<std::string> names;
  for (size_t i = 0; i < grads.size(); ++i) names.push_back("grad." + net.parameter_names()[i]);
  for (size_t i = 0; i < grads.size(); ++i) views.push_back({names[i], net.parameter_shapes()[i], grads[i].data()});
  if (auto s = engine::write_safetensors(out, views, {}); !s) {
    std::fprintf(stderr, "reference_dump: %s\n", s.error().message.c_str());
    return 2;
  }
  std::printf("wrote %s: loss %.6f, %zu gradients\n", out.c_str(), static_cast<double>(loss), grads.size());
  return 0;
}

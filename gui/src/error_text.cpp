#include "error_text.h"

#include <array>
#include <utility>

#include <QRegularExpression>

namespace tessera::gui {

QString error_text(std::string_view message) {
  QString text = QString::fromUtf8(message.data(), static_cast<qsizetype>(message.size()));
  // Longer options first where one is a prefix of another (--gpus-per-node, --gpus, --gpu).
  static const std::array<std::pair<const char*, const char*>, 23> kLabels{{
      {"--gpus-per-node", "GPUs per node"}, {"--gpus", "GPUs"},          {"--gpu", "GPU"},
      {"--inter-node-gbps", "Network"},     {"--global-batch", "Global batch"}, {"--micro-batch", "micro-batch"},
      {"--seq", "Sequence"},                {"--model", "Model"},        {"--cluster", "Cluster"},
      {"--precision", "Precision"},         {"--optimizer", "Optimizer"}, {"--recompute", "Recompute"},
      {"--plugin", "Plugin"},               {"--zero-stage", "ZeRO stage"}, {"--dp", "dp"},
      {"--tp", "tp"},                       {"--pp", "pp"},            {"--memory-headroom", "Memory headroom"},
      {"--activation-profile", "Activation profile"}, {"--torch-compile", "torch.compile"},
      {"--transformers-version", "Transformers"}, {"--runtime", "Runtime"},  {"--pin-memory", "pin_memory"},
  }};
  for (const auto& [option, label] : kLabels) {
    text.replace(QRegularExpression(QStringLiteral("%1\\b").arg(QRegularExpression::escape(QLatin1String(option)))), QLatin1String(label));
  }
  // nlohmann::json: "[json.exception.parse_error.101] parse error at line 3, column 1: syntax error ...; last read: '<file text>'".
  static const QRegularExpression kJsonTag(QStringLiteral("\\[json\\.exception\\.[a-z_]+\\.\\d+\\]\\s*"));
  static const QRegularExpression kLastRead(QStringLiteral(";\\s*last read: '.*?'"), QRegularExpression::DotMatchesEverythingOption);
  text.remove(kJsonTag);
  text.remove(kLastRead);
  return text.simplified();  // one line, never cut: the end of a message often names the fix
}

}  // namespace tessera::gui

#include "save_whole_file.h"

#include <QSaveFile>

namespace tessera::gui {

Error write_error(const QString& path, const QString& why) {
  return make_error(ErrorCode::io_error, QStringLiteral("cannot write %1: %2").arg(path, why).toStdString());
}

Status save_whole_file(const QString& path, const std::string& bytes) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return write_error(path, file.errorString());
  if (file.write(bytes.data(), static_cast<qint64>(bytes.size())) != static_cast<qint64>(bytes.size()) || !file.commit()) {
    return write_error(path, file.errorString());
  }
  return Status::success();
}

}  // namespace tessera::gui

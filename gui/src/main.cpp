// tessera-gui: the desktop planner. `tessera-gui [FILE...]` opens the window
// (a config.json, metrics.json or session file given is opened as if dropped);
// `tessera-gui --screenshot DIR [--size WxH]` writes one PNG per view and exits;
// `tessera-gui SESSION.json --export FILE` writes the session's report by FILE's suffix and exits.
#include <cstdio>

#include <QApplication>
#include <QCommandLineParser>
#include <QRegularExpression>

#include "main_window.h"
#include "quit_on_signal.h"
#include "screenshots.h"
#include "session_export.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Tessera"));
  QApplication::setApplicationName(QStringLiteral("tessera-gui"));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Tessera: will it fit, how to split it, how fast will it go"));
  parser.addHelpOption();
  const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                      QStringLiteral("Write a PNG of every view (plans.png, memory.png, mesh.png, pipeline.png, chunks.png, memory-timeline.png, "
                                                     "compare.png, measured.png) of a fixed example into DIR, then exit."),
                                      QStringLiteral("DIR"));
  const QCommandLineOption size(QStringLiteral("size"), QStringLiteral("Window size for --screenshot (default 1280x800)."), QStringLiteral("WxH"),
                                QStringLiteral("1280x800"));
  const QCommandLineOption export_file(QStringLiteral("export"),
                                       QStringLiteral("With one SESSION.json: write its report to FILE (.pdf, .html, .svg, .png, .csv, .md, .json) "
                                                      "without a window, then exit."),
                                       QStringLiteral("FILE"));
  parser.addOption(screenshot);
  parser.addOption(size);
  parser.addOption(export_file);
  parser.addPositionalArgument(QStringLiteral("FILE"), QStringLiteral("config.json, metrics.json or a session to open"), QStringLiteral("[FILE...]"));
  parser.process(app);

  if (parser.isSet(screenshot)) {
    const auto match = QRegularExpression(QStringLiteral("^(\\d+)x(\\d+)$")).match(parser.value(size));
    if (!match.hasMatch() || match.captured(1).toInt() < 320 || match.captured(2).toInt() < 240) {
      std::fprintf(stderr, "tessera-gui: --size must be WIDTHxHEIGHT, at least 320x240, e.g. 1920x1080\n");
      return 2;
    }
    const QSize window_size(match.captured(1).toInt(), match.captured(2).toInt());
    if (parser.positionalArguments().size() > 1) {
      std::fprintf(stderr, "tessera-gui: --screenshot takes one session file at most: tessera-gui [SESSION.json] --screenshot DIR\n");
      return 2;
    }
    const QString session = parser.positionalArguments().isEmpty() ? QString() : parser.positionalArguments().front();
    if (tessera::Status s = tessera::gui::write_screenshots(parser.value(screenshot), window_size, session); !s) {
      std::fprintf(stderr, "tessera-gui: %s\n", s.error().message.c_str());
      return 1;
    }
    return 0;
  }
  if (parser.isSet(export_file)) {
    if (parser.positionalArguments().size() != 1) {
      std::fprintf(stderr, "tessera-gui: --export needs exactly one session file: tessera-gui SESSION.json --export report.pdf\n");
      return 2;
    }
    if (tessera::Status s = tessera::gui::export_session(parser.positionalArguments().front(), parser.value(export_file)); !s) {
      std::fprintf(stderr, "tessera-gui: %s\n", s.error().message.c_str());
      return 1;
    }
    return 0;
  }
  tessera::gui::MainWindow window;
  tessera::gui::quit_on_termination_signals(&app);
  window.show();
  for (const QString& path : parser.positionalArguments()) window.openPath(path);
  return QApplication::exec();
}

// `tessera-gui [SESSION.json] --screenshot DIR`: the window at a fixed example
// (Llama-2-13B on 16 H100s in 2 nodes, global batch 32 × 4096 tokens) or at a
// saved session's inputs, one PNG per view: plans.png, memory.png, mesh.png,
// pipeline.png, chunks.png, memory-timeline.png, compare.png and measured.png
// (which says how to open a run: the example has none).
#pragma once

#include <QSize>
#include <QString>

#include "tessera/planner/status.h"

namespace tessera::gui {

// `session`: a session file's path, or empty for the example.
Status write_screenshots(const QString& directory, QSize window_size, const QString& session = {});

}  // namespace tessera::gui

// The ZeRO / chunks view: one tile per chunk, in execution order. The upper
// part of a tile is its parameters (solid on the GPU, hatched on the host)
// followed by its padding; the strip beneath is its optimizer states; white
// ticks split a sharded chunk into the data-parallel ranks' shards; a dark
// frame marks a chunk kept gathered on every rank. Hover for the tensors and owners.
#pragma once

#include <optional>

#include <QWidget>

#include "chunk_map.h"

namespace tessera::gui {

class ChunkView : public QWidget {
  Q_OBJECT

 public:
  explicit ChunkView(QWidget* parent = nullptr);

  void setChunkMap(ChunkMap map);
  void clearChunkMap();
  const std::optional<ChunkMap>& chunkMap() const { return map_; }
  // The lines above the tiles: whose chunks, their size and padding, their shards and placement.
  // For a plan without chunks the first says the map is Gemini's, for comparison, not the plan's.
  QStringList headerLines() const;
  // Where the wrapped header ended as last painted: the tiles start below it.
  double headerBottom() const { return header_bottom_; }

  QSize sizeHint() const override { return {900, 500}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QString tooltip(size_t chunk) const;

  std::optional<ChunkMap> map_;
  std::vector<QRectF> tiles_;  // as last painted
  double header_bottom_ = 0;
};

}  // namespace tessera::gui

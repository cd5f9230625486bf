// "Evaluate one layout": the plan in view's plugin, tp, pp, micro-batch,
// schedule and model chunks, ZeRO stage, CPU offload, recompute and sequence
// parallelism as controls; Evaluate shows exactly that layout, as `tessera
// estimate` would, fitting or not. Why a layout cannot be evaluated shows beneath.
#pragma once

#include <QGroupBox>

#include "layout_choice.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace tessera::gui {

class LayoutEditor : public QGroupBox {
  Q_OBJECT

 public:
  explicit LayoutEditor(QWidget* parent = nullptr);

  // Fills the controls (the plan in view's layout); `dp` is shown, not set: it follows the GPU count.
  // The model chunks go up to the model's layers over pp, the most the planner takes (every chunk needs a layer).
  void showLayout(const LayoutChoice& choice, int64_t dp, int64_t num_layers);
  LayoutChoice layout() const;
  // Why the last Evaluate failed, beneath the controls; empty clears it.
  void showError(const QString& message);
  QString errorText() const;
  QPushButton* evaluateButton() const { return evaluate_; }
  QSpinBox* tpBox() const { return tp_; }
  QSpinBox* ppBox() const { return pp_; }
  QSpinBox* microBatchBox() const { return micro_batch_; }
  QComboBox* pluginBox() const { return plugin_; }
  QComboBox* scheduleBox() const { return schedule_; }
  QSpinBox* modelChunksBox() const { return model_chunks_; }
  QSpinBox* recomputedBlocksBox() const { return recompute_layers_; }
  QSpinBox* zeroStageBox() const { return zero_stage_; }
  QSpinBox* cpBox() const { return cp_; }
  QSpinBox* dpReplicateBox() const { return dp_replicate_; }

 signals:
  void evaluateRequested(const tessera::gui::LayoutChoice& choice);

 private:
  void limitModelChunks();

  int64_t num_layers_ = 1;
  QComboBox* plugin_ = nullptr;
  QLabel* dp_ = nullptr;
  QSpinBox* tp_ = nullptr;
  QSpinBox* pp_ = nullptr;
  QSpinBox* micro_batch_ = nullptr;
  QComboBox* schedule_ = nullptr;
  QSpinBox* model_chunks_ = nullptr;
  QSpinBox* zero_stage_ = nullptr;
  QCheckBox* cpu_offload_ = nullptr;
  QComboBox* recompute_ = nullptr;
  QSpinBox* recompute_layers_ = nullptr;
  QCheckBox* sequence_parallel_ = nullptr;
  QSpinBox* cp_ = nullptr;
  QSpinBox* dp_replicate_ = nullptr;
  QPushButton* evaluate_ = nullptr;
  QLabel* error_ = nullptr;
};

}  // namespace tessera::gui

#include "layout_editor.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>

#include "enum_combo.h"
#include "error_text.h"

namespace tessera::gui {

namespace {

QSpinBox* count_box(QWidget* parent, int low, int high) {
  auto* box = new QSpinBox(parent);
  box->setRange(low, high);
  return box;
}

}  // namespace

LayoutEditor::LayoutEditor(QWidget* parent) : QGroupBox(tr("Evaluate one layout (as tessera estimate)"), parent) {
  plugin_ = enum_combo<planner::PluginKind>(this, false);
  dp_ = new QLabel(this);
  tp_ = count_box(this, 1, 1024);
  pp_ = count_box(this, 1, 1024);
  micro_batch_ = count_box(this, 1, 1 << 20);
  schedule_ = enum_combo<planner::PipelineSchedule>(this, false);
  model_chunks_ = count_box(this, 1, 1);  // up to layers / pp once a plan is shown (limitModelChunks)
  zero_stage_ = count_box(this, 0, 3);  // 3: DeepSpeed's ZeRO-3 (--runtime deepspeed)
  cpu_offload_ = new QCheckBox(tr("CPU offload"), this);
  recompute_ = enum_combo<planner::RecomputeMode>(this, false);  // op_selective: torchtitan's
  recompute_layers_ = count_box(this, 0, 1024);
  recompute_layers_->setSpecialValueText(tr("all"));
  recompute_layers_->setToolTip(tr("Under full recompute: only the first blocks of each model chunk are recomputed whole, "
                                   "the others keep all they save; 0 = every block (--recompute-num-layers)"));
  sequence_parallel_ = new QCheckBox(tr("sequence parallel"), this);
  cp_ = count_box(this, 1, 1024);
  cp_->setToolTip(tr("Context parallelism: each sequence split over this many ranks (ring attention; --cp)"));
  dp_replicate_ = count_box(this, 1, 1024);
  dp_replicate_->setToolTip(tr("Hybrid sharding: the data-parallel ranks as this many replicas, states sharded within one (--dp-replicate)"));
  evaluate_ = new QPushButton(tr("Evaluate"), this);
  evaluate_->setToolTip(tr("Show exactly this layout in every view, fitting or not"));
  error_ = new QLabel(this);
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #B01E1E;"));
  error_->setVisible(false);
  auto* grid = new QGridLayout(this);
  const auto add = [&](int row, int column, const QString& label, QWidget* control) {
    grid->addWidget(new QLabel(label, this), row, 2 * column);
    grid->addWidget(control, row, 2 * column + 1);
  };
  add(0, 0, tr("plugin"), plugin_);
  add(0, 1, tr("dp"), dp_);
  add(0, 2, tr("ZeRO stage"), zero_stage_);
  add(1, 0, tr("tp"), tp_);
  add(1, 1, tr("pp"), pp_);
  add(1, 2, tr("micro-batch"), micro_batch_);
  add(2, 0, tr("schedule"), schedule_);
  add(2, 1, tr("model chunks"), model_chunks_);
  add(2, 2, tr("recompute"), recompute_);
  add(3, 0, tr("cp"), cp_);
  add(3, 1, tr("dp replicas"), dp_replicate_);
  add(3, 2, tr("blocks"), recompute_layers_);
  grid->addWidget(cpu_offload_, 4, 0, 1, 2);
  grid->addWidget(sequence_parallel_, 4, 2, 1, 2);
  grid->addWidget(evaluate_, 4, 5);
  grid->addWidget(error_, 5, 0, 1, 6);
  connect(evaluate_, &QPushButton::clicked, this, [this] { emit evaluateRequested(layout()); });
  connect(pp_, &QSpinBox::valueChanged, this, &LayoutEditor::limitModelChunks);
  // The count of blocks is full recompute's only.
  const auto enable_blocks = [this] {
    recompute_layers_->setEnabled(combo_enum<planner::RecomputeMode>(recompute_) == planner::RecomputeMode::full);
  };
  connect(recompute_, &QComboBox::currentIndexChanged, this, enable_blocks);
  enable_blocks();
}

// validate_request.cpp's bound: pp × chunks may not exceed the model's layers.
void LayoutEditor::limitModelChunks() { model_chunks_->setMaximum(static_cast<int>(std::max<int64_t>(1, num_layers_ / pp_->value()))); }

void LayoutEditor::showLayout(const LayoutChoice& c, int64_t dp, int64_t num_layers) {
  num_layers_ = num_layers;
  set_combo_enum(plugin_, std::optional(c.plugin));
  dp_->setText(QString::number(dp));
  tp_->setValue(static_cast<int>(c.tp));
  pp_->setValue(static_cast<int>(c.pp));
  limitModelChunks();  // pp may not have changed
  micro_batch_->setValue(static_cast<int>(c.micro_batch));
  set_combo_enum(schedule_, std::optional(c.schedule));
  model_chunks_->setValue(static_cast<int>(c.model_chunks));
  zero_stage_->setValue(c.zero_stage);
  cpu_offload_->setChecked(c.cpu_offload);
  set_combo_enum(recompute_, std::optional(c.recompute));
  recompute_layers_->setValue(static_cast<int>(c.recompute_num_layers));
  sequence_parallel_->setChecked(c.sequence_parallel);
  cp_->setValue(static_cast<int>(c.cp));
  dp_replicate_->setValue(static_cast<int>(c.dp_replicate));
}

LayoutChoice LayoutEditor::layout() const {
  LayoutChoice c;
  c.plugin = combo_enum<planner::PluginKind>(plugin_).value_or(planner::PluginKind::torch_ddp);
  c.tp = tp_->value();
  c.pp = pp_->value();
  c.micro_batch = micro_batch_->value();
  c.schedule = combo_enum<planner::PipelineSchedule>(schedule_).value_or(planner::PipelineSchedule::one_f_one_b);
  c.model_chunks = model_chunks_->value();
  c.zero_stage = zero_stage_->value();
  c.cpu_offload = cpu_offload_->isChecked();
  c.recompute = combo_enum<planner::RecomputeMode>(recompute_).value_or(planner::RecomputeMode::none);
  c.recompute_num_layers = recompute_layers_->value();
  c.sequence_parallel = sequence_parallel_->isChecked();
  c.cp = cp_->value();
  c.dp_replicate = dp_replicate_->value();
  return c;
}

void LayoutEditor::showError(const QString& message) {
  error_->setText(message.isEmpty() ? QString() : error_text(message.toStdString()));
  error_->setVisible(!message.isEmpty());
}

QString LayoutEditor::errorText() const { return error_->text(); }

}  // namespace tessera::gui

#include "input_panel.h"

#include <cmath>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>

#include "enum_combo.h"
#include "error_text.h"
#include "fit_slider.h"
#include "tessera/planner/registry.h"

namespace tessera::gui {

namespace {

void select_or_add(QComboBox* combo, const std::string& value, const QString& label) {
  const QString data = QString::fromStdString(value);
  int index = combo->findData(data);
  if (index < 0) {
    combo->addItem(label, data);
    index = combo->count() - 1;
    if (label != data) combo->setItemData(index, data, Qt::ToolTipRole);  // the full path
  }
  combo->setCurrentIndex(index);
}

// A config.json's folder and file name ("Qwen2-7B/config.json"): every Hugging Face config is called config.json.
QString config_label(const std::string& path) {
  const QFileInfo file(QString::fromStdString(path));
  const QString folder = file.dir().dirName();
  return folder.isEmpty() || folder == QStringLiteral(".") ? file.fileName() : folder + QLatin1Char('/') + file.fileName();
}

// Sliders move in powers of two; their spin box holds the exact value.
int log2_of(int value) { return static_cast<int>(std::lround(std::log2(std::max(1, value)))); }

}  // namespace

InputPanel::InputPanel(QWidget* parent) : QWidget(parent) {
  auto* form = new QFormLayout(this);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  // A control with a check box of its own beside it, as one row's field.
  auto with_box = [this](QWidget* control, QCheckBox* box) {
    auto* row = new QWidget(this);
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(control, 1);
    layout->addWidget(box);
    return row;
  };
  auto add_row = [&](const QString& label, QWidget* field, InputField error_field) {
    auto* column = new QVBoxLayout;
    column->setSpacing(2);
    column->addWidget(field);
    column->addWidget(addErrorLabel(error_field));
    form->addRow(label, column);
  };
  auto with_button = [this](QWidget* field, QPushButton* button) {
    auto* box = new QWidget(this);
    auto* row = new QHBoxLayout(box);
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(field, 1);
    row->addWidget(button);
    return box;
  };

  model_ = new QComboBox(this);
  for (const std::string& name : planner::shipped_model_names()) model_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  auto* browse = new QPushButton(tr("Open…"), this);
  browse->setToolTip(tr("A Hugging Face config.json (or drop one on the window)"));
  connect(browse, &QPushButton::clicked, this, &InputPanel::browseModel);
  add_row(tr("Model"), with_button(model_, browse), InputField::model);

  cluster_ = new QComboBox(this);
  cluster_->addItem(tr("custom: GPU × count"), QString());
  for (const std::string& name : planner::shipped_cluster_names()) cluster_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  add_row(tr("Cluster"), cluster_, InputField::cluster);

  gpu_ = new QComboBox(this);
  for (const std::string& name : planner::shipped_gpu_names()) gpu_->addItem(QString::fromStdString(name), QString::fromStdString(name));
  add_row(tr("GPU"), gpu_, InputField::gpu);

  // Ranges are the planner's limits (cluster.h, search.h), so no value a session holds is clamped silently.
  gpus_ = new QSpinBox(this);
  gpus_->setRange(0, static_cast<int>(planner::kMaxGpus));  // 0 is refused by name, not reverted
  gpus_per_node_ = new QSpinBox(this);
  gpus_per_node_->setRange(1, static_cast<int>(planner::kMaxGpusPerNode));
  gpus_per_node_->setPrefix(tr("per node "));
  auto* gpu_counts = new QWidget(this);
  auto* gpu_row = new QHBoxLayout(gpu_counts);
  gpu_row->setContentsMargins(0, 0, 0, 0);
  gpu_row->addWidget(gpus_, 1);
  gpu_row->addWidget(gpus_per_node_, 1);
  add_row(tr("GPUs"), gpu_counts, InputField::gpus);

  inter_node_ = new QDoubleSpinBox(this);
  inter_node_->setDecimals(0);
  inter_node_->setRange(1, planner::kMaxInterNodeGbitS);
  inter_node_->setSuffix(tr(" Gbit/s"));
  add_row(tr("Network"), inter_node_, InputField::network);

  // A spin box for the exact value above a slider over powers of two, and the line saying how far the plan in view fits.
  auto power_of_two_control = [this](QSpinBox*& box, FitSlider*& slider, QLabel*& fit, const QString& suffix, PowerOfTwoRange range) {
    box = new QSpinBox(this);
    box->setRange(0, 1 << range.high);  // from 0, so that a typed 0 is refused by name instead of reverting
    box->setSuffix(suffix);
    slider = new FitSlider(this);
    slider->setRange(range.low, range.high);
    fit = new QLabel(this);
    fit->setStyleSheet(QStringLiteral("color: #555555;"));
    fit->setWordWrap(true);  // never widens the panel
    auto* pair = new QWidget(this);
    auto* column = new QVBoxLayout(pair);
    column->setContentsMargins(0, 0, 0, 0);
    column->setSpacing(2);
    column->addWidget(box);
    column->addWidget(slider);
    column->addWidget(fit);
    return pair;
  };
  add_row(tr("Global batch"), power_of_two_control(global_batch_, global_batch_slider_, global_batch_fit_, tr(" sequences"), kBatchSliderRange),
          InputField::global_batch);
  add_row(tr("Sequence"), power_of_two_control(seq_, seq_slider_, seq_fit_, tr(" tokens"), kSeqSliderRange),
          InputField::seq_len);  // slider 128 .. 2^20 tokens

  precision_ = enum_combo<Precision>(this, false);
  add_row(tr("Precision"), precision_, InputField::precision);
  optimizer_ = enum_combo<OptimizerKind>(this, false);
  add_row(tr("Optimizer"), optimizer_, InputField::optimizer);
  activation_profile_ = enum_combo<ActivationProfile>(this, false);
  activation_profile_->setToolTip(tr("Which runtime's activations are counted, as tessera plan --activation-profile"));
  torch_compile_ = new QCheckBox(tr("torch.compile"), this);
  torch_compile_->setToolTip(tr("The model runs compiled, its element-wise ops fused: without it the hf profiles and torchtitan's Llama "
                                "run op by op, each op through GPU memory (slower; memory is the same), as tessera plan --torch-compile"));
  transformers_ = new QComboBox(this);
  for (const planner::TransformersVersion v : planner::modelled_transformers_releases()) {
    const QString name = QString::fromStdString(planner::to_string(v));
    transformers_->addItem(v == planner::kMeasuredTransformers ? tr("%1 (measured)").arg(name) : name, name);
  }
  transformers_->setToolTip(tr("The hf profiles: the transformers release that runs the model; older releases return fp32 logits or keep a "
                               "[b, 1, s, s] attention mask, as tessera plan --transformers-version"));
  add_row(tr("Activation profile"), with_box(activation_profile_, torch_compile_), InputField::activation_profile);
  form->addRow(tr("Transformers"), transformers_);  // its errors show under the profile, whose release it is
  recompute_ = enum_combo<RecomputeMode>(this, true);  // op_selective: torchtitan's, refused by name under the other runtimes
  add_row(tr("Recompute"), recompute_, InputField::recompute);
  plugin_ = enum_combo<PluginKind>(this, true);
  add_row(tr("Plugin"), plugin_, InputField::plugin);
  runtime_ = enum_combo<planner::Runtime>(this, false);
  runtime_->setToolTip(tr("Whose model states the plans count, and so what the search tries, as tessera plan --runtime: colossalai (its "
                          "five plugins), megatron (Megatron-Core's hybrid_parallel), torchtitan (FSDP2) or deepspeed (ZeRO-3, and its pipeline engine "
                          "in bf16 and fp16)"));
  pin_memory_ = new QCheckBox(tr("pin_memory"), this);
  pin_memory_->setToolTip(tr("ColossalAI's Gemini keeps a pinned host copy of every chunk (its default enable_async_reduce=True); "
                             "DeepSpeed's offload_optimizer pins its gradient buffers; as tessera plan --pin-memory"));
  add_row(tr("Runtime"), with_box(runtime_, pin_memory_), InputField::runtime);
  memory_headroom_ = new QLineEdit(this);
  memory_headroom_->setPlaceholderText(tr("GiB, or % of the GPU"));
  memory_headroom_->setToolTip(tr("Memory every GPU must leave free, as GiB (2) or a percentage of its memory (10%); "
                                  "plans that would use it do not fit, as with tessera plan --memory-headroom"));
  add_row(tr("Memory headroom"), memory_headroom_, InputField::memory_headroom);

  setInputs(PlannerInputs{});
  // First: a preset's values are in the greyed fields before the inputs are emitted.
  connect(cluster_, &QComboBox::currentIndexChanged, this, &InputPanel::updateClusterControls);
  connect(activation_profile_, &QComboBox::currentIndexChanged, this, &InputPanel::updateTransformersControl);
  for (QComboBox* combo : {model_, cluster_, gpu_, precision_, optimizer_, activation_profile_, transformers_, recompute_, plugin_, runtime_}) {
    connect(combo, &QComboBox::currentIndexChanged, this, &InputPanel::emitInputs);
  }
  for (QSpinBox* box : {gpus_, gpus_per_node_, global_batch_, seq_}) connect(box, &QSpinBox::valueChanged, this, &InputPanel::emitInputs);
  connect(inter_node_, &QDoubleSpinBox::valueChanged, this, &InputPanel::emitInputs);
  for (QCheckBox* box : {torch_compile_, pin_memory_}) connect(box, &QCheckBox::toggled, this, &InputPanel::emitInputs);
  connect(memory_headroom_, &QLineEdit::textEdited, this, &InputPanel::emitInputs);
  connect(seq_slider_, &QSlider::valueChanged, seq_, [this](int v) { seq_->setValue(1 << v); });
  connect(global_batch_slider_, &QSlider::valueChanged, global_batch_, [this](int v) { global_batch_->setValue(1 << v); });
}

QLabel* InputPanel::addErrorLabel(InputField field) {
  auto* label = new QLabel(this);
  label->setWordWrap(true);
  label->setStyleSheet(QStringLiteral("color: #B01E1E;"));
  label->setVisible(false);
  errors_[static_cast<size_t>(field)] = label;
  return label;
}

PlannerInputs InputPanel::inputs() const {
  PlannerInputs in;
  in.model = model_->currentData().toString().toStdString();
  in.cluster = cluster_->currentData().toString().toStdString();
  in.gpu = gpu_->currentData().toString().toStdString();
  in.gpus = gpus_->value();
  in.gpus_per_node = gpus_per_node_->value();
  in.inter_node_gbit_s = inter_node_->value();
  in.global_batch = global_batch_->value();
  in.seq_len = seq_->value();
  in.precision = combo_enum<Precision>(precision_).value_or(Precision::bf16);
  in.optimizer = combo_enum<OptimizerKind>(optimizer_).value_or(OptimizerKind::adamw);
  in.activation_profile = combo_enum<ActivationProfile>(activation_profile_).value_or(ActivationProfile::flash);
  in.torch_compile = torch_compile_->isChecked();
  in.transformers_version = planner::parse_transformers_version(transformers_->currentData().toString().toStdString()).value_or(planner::kMeasuredTransformers);
  in.recompute = combo_enum<RecomputeMode>(recompute_);
  in.plugin = combo_enum<PluginKind>(plugin_);
  in.runtime = combo_enum<planner::Runtime>(runtime_).value_or(planner::Runtime::colossalai);
  in.pin_memory = pin_memory_->isChecked();
  // Empty reads as none: a cleared field leaves every GPU's memory usable.
  in.memory_headroom = memory_headroom_->text().trimmed().isEmpty() ? std::string("0") : memory_headroom_->text().trimmed().toStdString();
  return in;
}

void InputPanel::setInputs(const PlannerInputs& in) {
  const QSignalBlocker blockers[] = {QSignalBlocker(model_), QSignalBlocker(cluster_), QSignalBlocker(gpu_), QSignalBlocker(gpus_),
                                     QSignalBlocker(gpus_per_node_), QSignalBlocker(inter_node_), QSignalBlocker(global_batch_),
                                     QSignalBlocker(global_batch_slider_), QSignalBlocker(seq_), QSignalBlocker(seq_slider_),
                                     QSignalBlocker(precision_), QSignalBlocker(optimizer_), QSignalBlocker(activation_profile_),
                                     QSignalBlocker(torch_compile_), QSignalBlocker(transformers_), QSignalBlocker(recompute_), QSignalBlocker(plugin_),
                                     QSignalBlocker(runtime_), QSignalBlocker(pin_memory_), QSignalBlocker(memory_headroom_)};
  select_or_add(model_, in.model, config_label(in.model));
  select_or_add(cluster_, in.cluster, QString::fromStdString(in.cluster));
  select_or_add(gpu_, in.gpu, QFileInfo(QString::fromStdString(in.gpu)).fileName());
  gpus_->setValue(static_cast<int>(in.gpus));
  gpus_per_node_->setValue(static_cast<int>(in.gpus_per_node));
  inter_node_->setValue(in.inter_node_gbit_s);
  global_batch_->setValue(static_cast<int>(in.global_batch));
  global_batch_slider_->setValue(log2_of(static_cast<int>(in.global_batch)));
  seq_->setValue(static_cast<int>(in.seq_len));
  seq_slider_->setValue(log2_of(static_cast<int>(in.seq_len)));
  set_combo_enum(precision_, std::optional<Precision>(in.precision));
  set_combo_enum(optimizer_, std::optional<OptimizerKind>(in.optimizer));
  set_combo_enum(activation_profile_, std::optional<ActivationProfile>(in.activation_profile));
  torch_compile_->setChecked(in.torch_compile);
  const std::string release = planner::to_string(in.transformers_version);
  select_or_add(transformers_, release, QString::fromStdString(release));  // one not modelled: the planner says so
  updateTransformersControl();
  set_combo_enum(recompute_, in.recompute);
  set_combo_enum(plugin_, in.plugin);
  set_combo_enum(runtime_, std::optional<planner::Runtime>(in.runtime));
  pin_memory_->setChecked(in.pin_memory);
  if (memory_headroom_->text().trimmed().toStdString() != in.memory_headroom && !(in.memory_headroom == "0" && memory_headroom_->text().trimmed().isEmpty())) {
    memory_headroom_->setText(QString::fromStdString(in.memory_headroom));  // kept as typed while it means the same
  }
  updateClusterControls();
}

void InputPanel::showError(const std::optional<InputError>& error) {
  for (size_t i = 0; i < errors_.size(); ++i) {
    const bool here = error && static_cast<size_t>(error->field) == i;
    errors_[i]->setText(here ? error_text(error->message) : QString());
    errors_[i]->setVisible(here);
  }
}

QString InputPanel::errorText(InputField field) const { return errors_[static_cast<size_t>(field)]->text(); }

void InputPanel::describeModel(const std::string& source, const QString& label) {
  const int index = model_->findData(QString::fromStdString(source));
  if (index >= 0 && model_->itemText(index) != label) model_->setItemText(index, label);
}

void InputPanel::showFitLimits(const std::optional<FitLimits>& limits) {
  // 0 (nothing fits) marks below the slider's range, so all of its groove is tinted.
  const auto mark = [](FitSlider* slider, QLabel* line, std::optional<int64_t> limit, bool by_memory, const QString& unit) {
    slider->setFitLimit(limit ? std::optional<int>(*limit > 0 ? log2_of(static_cast<int>(*limit)) : slider->minimum() - 1) : std::nullopt);
    const QString value = limit ? QLocale().toString(static_cast<qlonglong>(*limit)) : QString();
    if (!limit) line->clear();
    else if (*limit == 0) line->setText(tr("the plan fits at none of these"));
    // The slider steps by powers of two, and the limit is checked at its steps: a value between two may fit too.
    else if (by_memory) line->setText(tr("the plan fits up to %1 (of this slider's powers of two)").arg(value));
    // Not memory: where the plan or the slider ends (the model's positions, the most micro-batches).
    else line->setText(tr("the plan fits up to %1, every value it can take").arg(value));
    line->setToolTip(tr("The largest power of two of %1 at which the plan in view fits, the other inputs as they are").arg(unit));
    line->setVisible(limit.has_value());
  };
  mark(seq_slider_, seq_fit_, limits ? std::optional<int64_t>(limits->seq_len) : std::nullopt, limits && limits->seq_len_bounded_by_memory, tr("tokens"));
  mark(global_batch_slider_, global_batch_fit_, limits ? std::optional<int64_t>(limits->global_batch) : std::nullopt,
       limits && limits->global_batch_bounded_by_memory, tr("sequences"));
}

QString InputPanel::fitText(InputField field) const {
  if (field == InputField::seq_len) return seq_fit_->text();
  if (field == InputField::global_batch) return global_batch_fit_->text();
  return {};
}

void InputPanel::browseModel() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a Hugging Face config.json"), QString(), tr("Model config (*.json)"));
  if (path.isEmpty()) return;
  select_or_add(model_, path.toStdString(), config_label(path.toStdString()));  // emits through currentIndexChanged
}

void InputPanel::emitInputs() {
  // Keep the sliders on the spin boxes' values without echoing back.
  const QSignalBlocker seq_blocker(seq_slider_), batch_blocker(global_batch_slider_);
  seq_slider_->setValue(log2_of(seq_->value()));
  global_batch_slider_->setValue(log2_of(global_batch_->value()));
  emit inputsChanged(inputs());
}

void InputPanel::updateTransformersControl() {
  transformers_->setEnabled(planner::runs_hugging_face_modules(combo_enum<ActivationProfile>(activation_profile_).value_or(ActivationProfile::flash)));
}

void InputPanel::updateClusterControls() {
  const std::string name = cluster_->currentData().toString().toStdString();
  for (QWidget* w : std::initializer_list<QWidget*>{gpu_, gpus_, gpus_per_node_, inter_node_}) w->setEnabled(name.empty());
  if (name.empty()) return;
  // The greyed fields show the preset's GPU, count and network, not what was typed for a custom cluster.
  auto cluster = planner::load_cluster(name, "--cluster");
  if (!cluster) return;  // the error shows under the cluster control
  const QSignalBlocker blockers[] = {QSignalBlocker(gpu_), QSignalBlocker(gpus_), QSignalBlocker(gpus_per_node_), QSignalBlocker(inter_node_)};
  select_or_add(gpu_, cluster->gpu.name, QString::fromStdString(cluster->gpu.name));
  gpus_->setValue(static_cast<int>(cluster->world_size()));
  gpus_per_node_->setValue(static_cast<int>(cluster->gpus_per_node));
  inter_node_->setValue(cluster->inter_node_gbit_s);
}

}  // namespace tessera::gui

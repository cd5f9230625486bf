// The controls on the left: model, cluster, GPU, batch, sequence, precision,
// optimizer, activation profile and torch.compile, recompute, plugin and the memory headroom. Every change emits the whole set of inputs
// at once (sliders while they are dragged); an invalid input is shown in red
// beneath the control that causes it. The sequence and batch sliders mark the
// largest value at which the plan in view still fits.
#pragma once

#include <array>
#include <optional>

#include <QWidget>

#include "fit_limits.h"
#include "planner_inputs.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;

namespace tessera::gui {

class FitSlider;

class InputPanel : public QWidget {
  Q_OBJECT

 public:
  explicit InputPanel(QWidget* parent = nullptr);

  PlannerInputs inputs() const;
  // Shows `inputs` without emitting inputsChanged.
  void setInputs(const PlannerInputs& inputs);
  void showError(const std::optional<InputError>& error);
  // The error shown next to `field`, empty when none: for tests and screen readers.
  QString errorText(InputField field) const;
  // Marks the largest sequence and batch at which the plan in view fits; none: no plan, nothing marked.
  void showFitLimits(const std::optional<FitLimits>& limits);
  // The line beneath the sequence or batch slider ("the plan fits up to 16,384"), for tests.
  QString fitText(InputField field) const;

  // Names a config.json in the model list once it is read: "<its name> · 6.74B parameters" (the path in the tooltip).
  void describeModel(const std::string& source, const QString& label);

  QComboBox* modelBox() const { return model_; }
  QSpinBox* globalBatchBox() const { return global_batch_; }
  QSpinBox* seqBox() const { return seq_; }
  FitSlider* seqSlider() const { return seq_slider_; }
  FitSlider* globalBatchSlider() const { return global_batch_slider_; }
  QSpinBox* gpusBox() const { return gpus_; }
  QLineEdit* memoryHeadroomEdit() const { return memory_headroom_; }
  QCheckBox* torchCompileBox() const { return torch_compile_; }
  QComboBox* transformersBox() const { return transformers_; }
  QComboBox* runtimeBox() const { return runtime_; }
  QCheckBox* pinMemoryBox() const { return pin_memory_; }

 public slots:
  // Lets the user pick a config.json and makes it the model.
  void browseModel();

 signals:
  void inputsChanged(const tessera::gui::PlannerInputs& inputs);

 private:
  void emitInputs();
  void updateClusterControls();
  void updateTransformersControl();  // the release choice, where an hf profile reads it
  QLabel* addErrorLabel(InputField field);

  QComboBox* model_ = nullptr;
  QComboBox* cluster_ = nullptr;
  QComboBox* gpu_ = nullptr;
  QSpinBox* gpus_ = nullptr;
  QSpinBox* gpus_per_node_ = nullptr;
  QDoubleSpinBox* inter_node_ = nullptr;
  QSpinBox* global_batch_ = nullptr;
  FitSlider* global_batch_slider_ = nullptr;
  QLabel* global_batch_fit_ = nullptr;
  QSpinBox* seq_ = nullptr;
  FitSlider* seq_slider_ = nullptr;
  QLabel* seq_fit_ = nullptr;
  QComboBox* precision_ = nullptr;
  QComboBox* optimizer_ = nullptr;
  QComboBox* activation_profile_ = nullptr;
  QCheckBox* torch_compile_ = nullptr;
  QComboBox* transformers_ = nullptr;  // enabled under the hf* profiles
  QComboBox* recompute_ = nullptr;
  QComboBox* plugin_ = nullptr;
  QComboBox* runtime_ = nullptr;
  QCheckBox* pin_memory_ = nullptr;
  QLineEdit* memory_headroom_ = nullptr;
  std::array<QLabel*, kNumInputFields> errors_{};
};

}  // namespace tessera::gui

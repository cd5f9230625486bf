// The line above the views: the verdict in bold, green or red, then the plan
// and its speed, wrapped as one paragraph. Laid out with a QTextLayout and a
// format over the verdict's characters: a rich-text QLabel parsed its HTML into
// a text document again on every control change, a fifth of the memory view's
// latency (perf of gui_bench's UI thread).
#pragma once

#include <QColor>
#include <QTextLayout>
#include <QWidget>

namespace tessera::gui {

class VerdictLabel : public QWidget {
  Q_OBJECT

 public:
  explicit VerdictLabel(QWidget* parent = nullptr);

  // `lead` in bold `colour`, then `rest` in the window's text colour; both plain text.
  void setVerdict(const QString& lead, const QColor& colour, const QString& rest);
  void setPlainText(const QString& text);
  void clear() { setPlainText(QString()); }
  QString text() const { return text_; }

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  void setContents(QString text, int lead_length, const QColor& colour);
  // Lays the text out `width` pixels wide unless it already is; its height.
  int layOut(int width) const;

  QString text_;
  int lead_length_ = 0;
  QColor lead_colour_;
  mutable QTextLayout layout_;
  mutable int laid_out_width_ = -1;
  mutable int laid_out_height_ = 0;
};

}  // namespace tessera::gui

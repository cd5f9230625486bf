// Runs the planner's plan search off the UI thread. A newer search cancels
// the older ones: one not yet started is skipped, one still running is asked to
// stop and its result dropped, so only the latest inputs reach the views. The
// running search's progress can be read at any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include <QObject>
#include <QString>
#include <QThreadPool>

#include "tessera/planner/model.h"
#include "tessera/planner/search.h"

namespace tessera::gui {

class PlanSearchWorker : public QObject {
  Q_OBJECT

 public:
  explicit PlanSearchWorker(QObject* parent = nullptr);
  ~PlanSearchWorker() override;

  void search(std::shared_ptr<const planner::Model> model, planner::PlanRequest request);
  // Drops every search asked for so far: none of them delivers a result.
  void cancel();
  // True from search() until its result (or error) has been delivered.
  bool busy() const { return busy_; }
  // Candidates done and enumerated by the latest search (0 of 0 before it starts).
  std::pair<int64_t, int64_t> progress() const;

 signals:
  // `result` is null when the search failed; `error` then says why.
  void finished(std::shared_ptr<const planner::PlanSearchResult> result, QString error, double seconds);

 private:
  std::atomic<uint64_t> latest_{0};
  bool busy_ = false;
  std::shared_ptr<planner::SearchProgress> progress_;  // the latest search's, shared with its thread
  QThreadPool pool_;  // one thread; declared last, so it is joined before the members it uses go
};

}  // namespace tessera::gui

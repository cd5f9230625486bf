#include "plan_search_worker.h"

#include <chrono>

namespace tessera::gui {

PlanSearchWorker::PlanSearchWorker(QObject* parent) : QObject(parent) { pool_.setMaxThreadCount(1); }

PlanSearchWorker::~PlanSearchWorker() {
  cancel();  // whatever is still queued or running is stale now
  pool_.waitForDone();
}

void PlanSearchWorker::cancel() {
  ++latest_;
  if (progress_) progress_->stop = true;
  busy_ = false;
}

std::pair<int64_t, int64_t> PlanSearchWorker::progress() const {
  if (!progress_) return {0, 0};
  return {progress_->done.load(std::memory_order_relaxed), progress_->candidates.load(std::memory_order_relaxed)};
}

void PlanSearchWorker::search(std::shared_ptr<const planner::Model> model, planner::PlanRequest request) {
  if (progress_) progress_->stop = true;  // the older search's result would be dropped anyway
  const uint64_t generation = ++latest_;
  busy_ = true;
  progress_ = std::make_shared<planner::SearchProgress>();
  pool_.start([this, generation, progress = progress_, model = std::move(model), request = std::move(request)] {
    if (generation != latest_) return;  // a newer search was asked for before this one started
    const auto start = std::chrono::steady_clock::now();
    auto result = planner::search_plans(*model, request, progress.get());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::shared_ptr<const planner::PlanSearchResult> shared;
    QString error;
    if (result) {
      shared = std::make_shared<const planner::PlanSearchResult>(std::move(result).value());
    } else {
      error = QString::fromStdString(result.error().message);
    }
    // Delivered on the UI thread; dropped there if a newer search has been asked for meanwhile.
    QMetaObject::invokeMethod(
        this,
        [this, generation, shared, error, seconds] {
          if (generation != latest_) return;
          busy_ = false;
          emit finished(shared, error, seconds);
        },
        Qt::QueuedConnection);
  });
}

}  // namespace tessera::gui

#include "plan_search_worker.h"

#include <chrono>

namespace tessera::gui {

PlanSearchWorker::PlanSearchWorker(QObject* parent) : QObject(parent) { pool_.setMaxThreadCount(1); }

PlanSearchWorker::~PlanSearchWorker() {
  ++latest_;  // whatever is still queued is stale now
  pool_.waitForDone();
}

void PlanSearchWorker::cancel() {
  ++latest_;
  busy_ = false;
}

void PlanSearchWorker::search(std::shared_ptr<const planner::Model> model, planner::PlanRequest request) {
  const uint64_t generation = ++latest_;
  busy_ = true;
  pool_.start([this, generation, model = std::move(model), request = std::move(request)] {
    if (generation != latest_) return;  // a newer search was asked for before this one started
    const auto start = std::chrono::steady_clock::now();
    auto result = planner::search_plans(*model, request);
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

//===- TaskThread.h - one worker thread, tasks in order ---------*- C++ -*-===//
//
// A thread that runs the tasks submitted to it one at a time, in the order
// they were submitted; each submit returns a ticket whose Status wait()
// returns (once). What a rank's communication stream (exec/Executor.h) and a
// swap file's I/O (SwapFile.h) run their async work on.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_TASKTHREAD_H
#define ZRT_SUPPORT_TASKTHREAD_H

#include "support/Status.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace zrt {

class TaskThread {
public:
  TaskThread() : thread_([this] { loop(); }) {}
  /// Runs what was submitted, then joins.
  ~TaskThread() { stop(); }
  TaskThread(const TaskThread &) = delete;
  TaskThread &operator=(const TaskThread &) = delete;

  int64_t submit(std::function<Status()> task) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t ticket = next_++;
    queue_.emplace_back(ticket, std::move(task));
    cv_.notify_all();
    return ticket;
  }

  /// The status of |ticket|'s task once it ran.
  Status wait(int64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_.count(ticket) > 0; });
    Status s = done_[ticket];
    done_.erase(ticket);
    return s;
  }

  /// Whether a task is queued or running.
  bool busy() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !queue_.empty() || running_;
  }

  /// Runs what was submitted, then joins the thread (idempotent).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopped, nothing left
      auto [ticket, task] = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      lock.unlock();
      Status s = task();
      lock.lock();
      running_ = false;
      done_[ticket] = s;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, std::function<Status()>>> queue_;
  std::map<int64_t, Status> done_;
  int64_t next_ = 0;
  bool running_ = false, stop_ = false;
  std::thread thread_; // last: started once the rest exists
};

} // namespace zrt

#endif // ZRT_SUPPORT_TASKTHREAD_H

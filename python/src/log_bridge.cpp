#include "log_bridge.h"

#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gil.h"
#include "log.h"

namespace mongoelector_py {

namespace me = mongoelector;

namespace {

struct Bridge {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<int, std::string>> queue;
  std::uint64_t queued = 0;
  std::uint64_t delivered = 0;
  bool stop = false;
  bool closed = false;   // after shutdown: write to stderr instead
  bool started = false;
  std::thread* drainer = nullptr;  // leaked on purpose: never destroyed at exit
};

// Leaked: static destructors run after the interpreter is gone and must not touch it.
Bridge* g_bridge = new Bridge;
py::object* g_logger = nullptr;

void drain(Bridge* b) {
  std::unique_lock<std::mutex> lk(b->mu);
  for (;;) {
    b->cv.wait(lk, [b] { return b->stop || !b->queue.empty(); });
    if (b->queue.empty() && b->stop) return;
    std::deque<std::pair<int, std::string>> batch;
    batch.swap(b->queue);
    lk.unlock();
    if (!interpreter_finalizing()) {
      py::gil_scoped_acquire gil;
      if (!interpreter_finalizing()) {
        for (auto& m : batch) {
          try {
            g_logger->attr("log")(m.first, "%s", m.second);
          } catch (py::error_already_set& e) {
            e.discard_as_unraisable("mongoelector log bridge");
          }
        }
      }
    }
    lk.lock();
    b->delivered += batch.size();
    b->cv.notify_all();
  }
}

void sink(me::LogLevel level, const std::string& message) {
  Bridge* b = g_bridge;
  std::lock_guard<std::mutex> g(b->mu);
  if (b->closed) {
    if (level >= me::LogLevel::Warning) std::fprintf(stderr, "mongoelector: %s\n", message.c_str());
    return;
  }
  b->queue.emplace_back(static_cast<int>(level), message);
  ++b->queued;
  if (!b->started) {
    b->started = true;
    b->drainer = new std::thread(drain, b);
  }
  b->cv.notify_all();
}

// After fork() only the forking thread exists in the child: the drainer is the
// parent's and the mutex was locked by before_fork(). Start over with a fresh bridge
// (the old one is abandoned, leaked).
void after_fork_in_child() {
  Bridge* old = g_bridge;
  auto* fresh = new Bridge;
  fresh->closed = old->closed;
  g_bridge = fresh;
}
void before_fork() { g_bridge->mu.lock(); }
void after_fork_in_parent() { g_bridge->mu.unlock(); }

}  // namespace

void install_log_bridge() {
  if (g_logger == nullptr)
    g_logger = new py::object(py::module_::import("logging").attr("getLogger")("mongoelector"));
  static bool atfork = [] {
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    return true;
  }();
  (void)atfork;
  me::set_log_sink(sink);
}

void flush_log_bridge() {
  Bridge* b = g_bridge;
  py::gil_scoped_release nogil;  // the drainer needs the GIL to deliver
  std::unique_lock<std::mutex> lk(b->mu);
  std::uint64_t target = b->queued;
  if (!b->started) return;
  b->cv.wait(lk, [b, target] { return b->delivered >= target || b->stop; });
}

void shutdown_log_bridge() {
  Bridge* b = g_bridge;
  std::thread* t = nullptr;
  {
    std::lock_guard<std::mutex> g(b->mu);
    if (b->closed) return;
    b->closed = true;
    b->stop = true;
    t = b->drainer;
    b->drainer = nullptr;
  }
  b->cv.notify_all();
  if (t != nullptr && t->joinable()) {
    py::gil_scoped_release nogil;
    t->join();
  }
  delete t;
}

}  // namespace mongoelector_py

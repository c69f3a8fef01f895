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

// A record as queued for the drainer (copies: the core's record lives only during the call).
struct Queued {
  int level;
  std::string message;
  me::LogFields fields;
};

struct Bridge {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Queued> queue;
  std::uint64_t queued = 0;
  std::uint64_t delivered = 0;
  bool stop = false;
  bool closed = false;  // after shutdown: write to stderr instead
  bool started = false;
  std::thread* drainer = nullptr;  // leaked on purpose: never destroyed at exit
};

// Leaked: static destructors run after the interpreter is gone and must not touch it.
Bridge* g_bridge = new Bridge;
py::object* g_logger = nullptr;

// The structured fields as logging's `extra`: always the same five attributes, None when
// absent, so that a format string or a JSON formatter may name any of them.
py::dict extra_of(const me::LogFields& f) {
  py::dict extra;
  extra["event"] = f.event == me::LogEvent::None ? py::object(py::none())
                                                 : py::object(py::str(me::log_event_name(f.event)));
  extra["key"] = f.key.empty() ? py::object(py::none()) : py::object(py::str(f.key));
  extra["fence"] = f.fence == 0 ? py::object(py::none()) : py::object(py::int_(f.fence));
  extra["uuid"] = f.uuid.empty() ? py::object(py::none()) : py::object(py::str(f.uuid));
  extra["host"] = f.host.empty() ? py::object(py::none()) : py::object(py::str(f.host));
  return extra;
}

void drain(Bridge* b) {
  std::unique_lock<std::mutex> lk(b->mu);
  for (;;) {
    b->cv.wait(lk, [b] { return b->stop || !b->queue.empty(); });
    if (b->queue.empty() && b->stop) return;
    std::deque<Queued> batch;
    batch.swap(b->queue);
    lk.unlock();
    if (!interpreter_finalizing()) {
      py::gil_scoped_acquire gil;
      if (!interpreter_finalizing()) {
        for (auto& m : batch) {
          try {
            g_logger->attr("log")(m.level, "%s", m.message, py::arg("extra") = extra_of(m.fields));
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

void sink(const me::LogRecord& r) {
  Bridge* b = g_bridge;
  std::lock_guard<std::mutex> g(b->mu);
  if (b->closed) {
    if (r.level >= me::LogLevel::Warning)
      std::fprintf(stderr, "mongoelector: %s\n", r.message.c_str());
    return;
  }
  b->queue.push_back(Queued{static_cast<int>(r.level), r.message, r.fields});
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

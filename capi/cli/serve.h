// `--http ADDR` and `--notify` of `run` and `elect`: a small HTTP/1.1 server (/leader,
// /healthz, /readyz) and systemd's notification protocol, on one thread of their own, so
// that neither a slow client nor the watchdog's timing depends on the main loop; and the
// health rule both of them apply (Health).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace cli {

// What this node's loop last achieved, fed by run/elect, judged for /healthz, /readyz
// and the watchdog. Healthy while the last successful round trip of the loop is recent:
// within ttl/2 when this node led (held) after it (a leader renews every ttl/3, so a
// renewal has failed or hangs; that is still well before its renew deadline at 0.9 ttl
// and its lease's end at ttl), within 1.5 ttl otherwise (a follower looks at least
// every ttl). Unhealthy also while the loop runs CMD as leader (holder) after the
// library's renew deadline has passed. Thread-safe.
class Health {
 public:
  enum class Role { kFollower, kLeader, kWaiting, kHolder, kLost };
  explicit Health(double ttl_s);
  // A round trip of the loop succeeded now (elect: a poll cycle that logged no warning;
  // run: a renewal); `leading`: this node leads (holds the lock) after it.
  void ok(bool leading);
  // The main loop's view: the role it acts on (it runs CMD as leader or holder).
  void set_role(Role role);
  // Whether this node leads now, from the library's clock-derived state (any thread).
  std::function<bool()> leads_now;

  struct Verdict {
    bool healthy = true;
    bool ready = false;  // leads (holds) now
    std::string role;    // "leader", "follower", "waiting", "holder", "lost"
    std::string reason;  // why unhealthy ("" when healthy)
    double last_ok_age_s = -1;
    double bound_s = 0;
  };
  Verdict check();
  double ttl_s() const { return ttl_s_; }

 private:
  const double ttl_s_;
  std::mutex mu_;
  double start_mono_s_;
  double last_ok_mono_s_ = -1;
  bool last_ok_leading_ = false;
  Role role_ = Role::kFollower;
};

// The HTTP server and the systemd notifications (Service::setup parses both; start runs
// the thread). /leader serves what the `read_leader` function last returned: it runs on
// a thread of its own every `leader_interval_s` (a read may take up to its time bound;
// the HTTP thread never waits for the storage).
class Service {
 public:
  ~Service();
  // Binds ADDR ("127.0.0.1:PORT", ":PORT", "[::1]:PORT"; "" for none) and opens
  // $NOTIFY_SOCKET when notify (then removed from the environment, so that CMD does not
  // take systemd's socket for its own). Prints the address listened on (port 0: the
  // port chosen). False (message printed, exit_code set) when ADDR is bad or cannot be
  // bound.
  bool setup(const std::string& sub, const std::string& http_addr, bool notify, int& exit_code);
  // `read_leader` returns the JSON object fields of /leader (without braces) or throws
  // nothing: it reports read errors in its fields. `self_json` the fields about this
  // node (cheap, local state).
  void start(Health* health, std::function<std::string()> read_leader,
             std::function<std::string()> self_json, double leader_interval_s);
  // READY=1, STATUS=..., STOPPING=1: sent at once when --notify found a socket (any
  // thread). STATUS lines are remembered and sent again after an unhealthy spell.
  void notify(const std::string& line);
  void status(const std::string& text);
  // STOPPING=1, once (any thread).
  void notify_stopping();
  // notify_stopping(), then ends the threads (waits for them).
  void stop();
  bool active() const { return listen_fd_ >= 0 || notify_fd_ >= 0; }

 private:
  void serve_loop();
  void leader_loop();
  void handle(int fd);
  std::string respond(const std::string& method, const std::string& path, int& code);

  int listen_fd_ = -1;
  int notify_fd_ = -1;
  sockaddr_un notify_addr_{};
  socklen_t notify_len_ = 0;
  double watchdog_s_ = 0;  // WATCHDOG_USEC / 2, 0: no watchdog
  int stop_r_ = -1, stop_w_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopping_sent_{false};
  Health* health_ = nullptr;
  std::function<std::string()> read_leader_, self_json_;
  double leader_interval_s_ = 1;
  std::mutex mu_;              // guards the fields below
  std::string leader_fields_;  // the last read_leader()
  double leader_read_mono_s_ = -1;
  std::string status_;  // the last STATUS text
  std::thread serve_thread_, leader_thread_;
};

}  // namespace cli

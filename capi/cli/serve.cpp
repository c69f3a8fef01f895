// `--http` and `--notify` (serve.h).
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.h"

namespace cli {

// ------------------------------------------------------------------ health --------

Health::Health(double ttl_s) : ttl_s_(ttl_s), start_mono_s_(mono_s()) {}

void Health::ok(bool leading) {
  std::lock_guard<std::mutex> g(mu_);
  last_ok_mono_s_ = mono_s();
  last_ok_leading_ = leading;
}

void Health::set_role(Role role) {
  std::lock_guard<std::mutex> g(mu_);
  role_ = role;
}

Health::Verdict Health::check() {
  const bool leads = leads_now ? leads_now() : false;
  std::lock_guard<std::mutex> g(mu_);
  Verdict v;
  static const char* const kNames[] = {"follower", "leader", "waiting", "holder", "lost"};
  v.role = kNames[static_cast<int>(role_)];
  v.ready = leads && role_ != Role::kLost;
  const double now = mono_s();
  const double since = last_ok_mono_s_ >= 0 ? last_ok_mono_s_ : start_mono_s_;
  v.last_ok_age_s = last_ok_mono_s_ >= 0 ? now - last_ok_mono_s_ : -1;
  v.bound_s = last_ok_leading_ ? ttl_s_ / 2 : ttl_s_ * 1.5;
  char buf[160];
  if (role_ == Role::kLost) {
    v.healthy = false;
    v.reason = "the lease was lost";
  } else if ((role_ == Role::kLeader || role_ == Role::kHolder) && !leads) {
    v.healthy = false;
    v.reason = "acts as leader past its renew deadline";
  } else if (role_ == Role::kWaiting) {
    v.healthy = true;  // waits for the lock: nothing of ours runs yet
  } else if (now - since > v.bound_s) {
    v.healthy = false;
    snprintf(buf, sizeof buf, "no successful round trip for %.1f s (bound %.1f s)", now - since,
             v.bound_s);
    v.reason = buf;
  }
  return v;
}

// ------------------------------------------------------------------ setup ---------

namespace {

// "HOST:PORT", ":PORT" (every interface) or "[V6]:PORT"; HOST an IP address or
// "localhost". False with `error` set otherwise.
bool parse_addr(const std::string& addr, sockaddr_storage& out, socklen_t& len,
                std::string& error) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    error = "expected HOST:PORT or :PORT";
    return false;
  }
  std::string host = addr.substr(0, colon), port_text = addr.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stol(port_text) > 65535) {
    error = "the port must be a number from 0 to 65535";
    return false;
  }
  const auto port = static_cast<uint16_t>(std::stol(port_text));
  out = {};
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&out);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6->sin6_addr) != 1) {
      error = "not an IPv6 address: " + host;
      return false;
    }
    len = sizeof *a6;
    return true;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(&out);
  a4->sin_family = AF_INET;
  a4->sin_port = htons(port);
  if (host.empty()) {
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, (host == "localhost" ? "127.0.0.1" : host).c_str(),
                       &a4->sin_addr) != 1) {
    error = "not an IP address: " + host + " (use 127.0.0.1:PORT, :PORT or [::1]:PORT)";
    return false;
  }
  len = sizeof *a4;
  return true;
}

std::string addr_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a6->sin6_port));
  }
  const auto* a4 = reinterpret_cast<const sockaddr_in*>(&a);
  inet_ntop(AF_INET, &a4->sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(a4->sin_port));
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

Service::~Service() {
  stop();
  close_fd(listen_fd_);
  close_fd(notify_fd_);
  close_fd(stop_r_);
  close_fd(stop_w_);
}

bool Service::setup(const std::string& sub, const std::string& http_addr, bool notify,
                    int& exit_code) {
  if (!http_addr.empty()) {
    sockaddr_storage sa;
    socklen_t len = 0;
    std::string error;
    if (!parse_addr(http_addr, sa, len, error)) {
      exit_code = usage_error(sub, "--http " + http_addr + ": " + error);
      return false;
    }
    listen_fd_ = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    if (listen_fd_ >= 0) setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
        listen(listen_fd_, 16) != 0) {
      msg("--http %s: cannot listen: %s", http_addr.c_str(), strerror(errno));
      close_fd(listen_fd_);
      exit_code = kExitConfig;
      return false;
    }
    len = sizeof sa;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    msg("http: listening on %s", addr_text(sa).c_str());
  }
  if (notify) {
    // systemd's notification protocol: datagrams to $NOTIFY_SOCKET, a path or, with a
    // leading '@', an abstract socket. Without it (not started by systemd) --notify does
    // nothing.
    const char* path = getenv("NOTIFY_SOCKET");
    if (path != nullptr && (path[0] == '/' || path[0] == '@') &&
        strlen(path) < sizeof notify_addr_.sun_path) {
      notify_addr_.sun_family = AF_UNIX;
      memcpy(notify_addr_.sun_path, path, strlen(path));
      if (path[0] == '@') notify_addr_.sun_path[0] = '\0';
      notify_len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + strlen(path) +
                                           (path[0] == '@' ? 0 : 1));
      notify_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      const char* usec = getenv("WATCHDOG_USEC");
      const char* wpid = getenv("WATCHDOG_PID");
      const bool ours = wpid == nullptr || atol(wpid) == static_cast<long>(getpid());
      if (usec != nullptr && ours && atoll(usec) > 0)
        watchdog_s_ = static_cast<double>(atoll(usec)) / 2e6;
    } else if (path != nullptr && path[0] != '\0') {
      msg("--notify: NOTIFY_SOCKET=%s is not a unix socket path: not notifying", path);
    }
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    msg("pipe: %s", strerror(errno));
    exit_code = kExitFailure;
    return false;
  }
  stop_r_ = fds[0];
  stop_w_ = fds[1];
  return true;
}

void Service::start(Health* health, std::function<std::string()> read_leader,
                    std::function<std::string()> self_json, double leader_interval_s) {
  health_ = health;
  read_leader_ = std::move(read_leader);
  self_json_ = std::move(self_json);
  leader_interval_s_ = leader_interval_s;
  serve_thread_ = std::thread([this] { serve_loop(); });
  if (listen_fd_ >= 0 && read_leader_) leader_thread_ = std::thread([this] { leader_loop(); });
}

void Service::notify(const std::string& line) {
  if (notify_fd_ < 0) return;
  sendto(notify_fd_, line.data(), line.size(), MSG_NOSIGNAL,
         reinterpret_cast<const sockaddr*>(&notify_addr_), notify_len_);
}

void Service::status(const std::string& text) {
  {
    std::lock_guard<std::mutex> g(mu_);
    status_ = text;
  }
  notify("STATUS=" + text);
}

void Service::notify_stopping() {
  if (!stopping_sent_.exchange(true)) notify("STOPPING=1");
}

void Service::stop() {
  notify_stopping();
  stopping_ = true;
  if (stop_w_ >= 0) write_all_nb(stop_w_, "x", 1);
  if (serve_thread_.joinable()) serve_thread_.join();
  if (leader_thread_.joinable()) leader_thread_.join();
}

// ------------------------------------------------------------------ threads -------

void Service::leader_loop() {
  while (!stopping_) {
    std::string fields = read_leader_();
    {
      std::lock_guard<std::mutex> g(mu_);
      leader_fields_ = std::move(fields);
      leader_read_mono_s_ = mono_s();
    }
    struct pollfd p = {stop_r_, POLLIN, 0};
    poll(&p, 1, static_cast<int>(leader_interval_s_ * 1000));
  }
}

void Service::serve_loop() {
  double next_ping = mono_s();  // READY=1 came before the thread (see run/elect)
  bool was_healthy = true;
  while (!stopping_) {
    // The watchdog and the STATUS line follow the health rule: no ping while unhealthy
    // (systemd then restarts the service after WatchdogSec).
    if (notify_fd_ >= 0) {
      Health::Verdict v = health_->check();
      if (v.healthy && watchdog_s_ > 0 && mono_s() >= next_ping) {
        notify("WATCHDOG=1");
        next_ping = mono_s() + watchdog_s_;
      }
      if (v.healthy != was_healthy) {
        std::string st;
        {
          std::lock_guard<std::mutex> g(mu_);
          st = status_;
        }
        notify("STATUS=" + (v.healthy ? st : "unhealthy: " + v.reason));
        was_healthy = v.healthy;
      }
    }
    int timeout_ms = 250;
    if (watchdog_s_ > 0)
      timeout_ms =
          std::max(1, std::min(timeout_ms, static_cast<int>((next_ping - mono_s()) * 1000)));
    struct pollfd fds[2] = {{stop_r_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (poll(fds, listen_fd_ >= 0 ? 2 : 1, timeout_ms) <= 0) continue;
    if (fds[0].revents != 0) break;
    if (listen_fd_ >= 0 && (fds[1].revents & POLLIN) != 0) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        handle(fd);
        close(fd);
      }
    }
  }
}

namespace {

// A request is read within this time and size, or refused: one client cannot hold the
// (single) server thread for long.
constexpr int kRequestTimeoutMs = 2000;
constexpr std::size_t kMaxRequest = 8192;

const char* reason_phrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    default:
      return "Service Unavailable";
  }
}

void send_all(int fd, const std::string& data, double deadline) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return;
    const int left = static_cast<int>((deadline - mono_s()) * 1000);
    if (left <= 0) return;
    struct pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, left);
  }
}

std::string bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace

void Service::handle(int fd) {
  const double deadline = mono_s() + kRequestTimeoutMs / 1000.0;
  std::string req;
  int code = 0;
  std::size_t head_end = std::string::npos;
  char buf[2048];
  while (head_end == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      req.append(buf, static_cast<std::size_t>(n));
      head_end = req.find("\r\n\r\n");
      if (head_end == std::string::npos) head_end = req.find("\n\n");
      if (head_end == std::string::npos && req.size() > kMaxRequest) {
        code = 400;
        break;
      }
      continue;
    }
    if (n == 0) return;  // closed before a whole request
    if (errno != EAGAIN && errno != EINTR) return;
    const int left = static_cast<int>((deadline - mono_s()) * 1000);
    if (left <= 0) {
      code = 408;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, left);
  }
  std::string method, path, body;
  if (code == 0) {
    // Request line: METHOD SP TARGET SP HTTP/1.x
    const std::string line = req.substr(0, req.find_first_of("\r\n"));
    const auto sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string::npos || sp2 == sp1) {
      code = 400;
    } else {
      method = line.substr(0, sp1);
      path = line.substr(sp1 + 1, sp2 - sp1 - 1);
      const std::string version = line.substr(sp2 + 1);
      const bool token = !method.empty() && method.find_first_not_of(
                                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == std::string::npos;
      if (!token || path.empty() || path[0] != '/' || path.find(' ') != std::string::npos ||
          (version != "HTTP/1.1" && version != "HTTP/1.0"))
        code = 400;
    }
  }
  if (code == 0) {
    path = path.substr(0, path.find('?'));
    body = respond(method, path, code);
  } else {
    body = std::string("{\"error\": \"") + reason_phrase(code) + "\"}";
  }
  body += "\n";
  std::string head =
      "HTTP/1.1 " + std::to_string(code) + " " + reason_phrase(code) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nCache-Control: no-store\r\nConnection: close\r\n";
  if (code == 405) head += "Allow: GET, HEAD\r\n";
  head += "\r\n";
  send_all(fd, method == "HEAD" ? head : head + body, deadline + 1);
}

std::string Service::respond(const std::string& method, const std::string& path, int& code) {
  if (path != "/leader" && path != "/healthz" && path != "/readyz") {
    code = 404;
    return "{\"error\": \"not found: use /leader, /healthz or /readyz\"}";
  }
  if (method != "GET" && method != "HEAD") {
    code = 405;
    return "{\"error\": \"method not allowed\"}";
  }
  const Health::Verdict v = health_->check();
  char nums[128];
  snprintf(nums, sizeof nums, ", \"last_ok_age_s\": %s, \"bound_s\": %.3f",
           v.last_ok_age_s < 0 ? "null" : std::to_string(v.last_ok_age_s).c_str(), v.bound_s);
  const std::string self = self_json_ ? self_json_() : "";
  if (path == "/healthz") {
    code = v.healthy ? 200 : 503;
    return "{\"healthy\": " + bool_text(v.healthy) + ", \"role\": " + json_quote(v.role) +
           ", \"reason\": " + (v.reason.empty() ? "null" : json_quote(v.reason)) + nums + "}";
  }
  if (path == "/readyz") {
    code = v.ready ? 200 : 503;
    return "{\"ready\": " + bool_text(v.ready) + ", \"role\": " + json_quote(v.role) + "}";
  }
  std::string fields;
  double age = -1;
  {
    std::lock_guard<std::mutex> g(mu_);
    fields = leader_fields_;
    if (leader_read_mono_s_ >= 0) age = mono_s() - leader_read_mono_s_;
  }
  code = 200;
  if (fields.empty())
    fields = "\"status\": \"unknown\", \"leader\": null, \"error\": \"not read yet\"";
  char age_text[64];
  snprintf(age_text, sizeof age_text, ", \"read_age_s\": %.3f", age < 0 ? 0.0 : age);
  return "{" + fields + age_text + ", \"self\": {" + self + ", \"ready\": " + bool_text(v.ready) +
         ", \"healthy\": " + bool_text(v.healthy) + "}}";
}

}  // namespace cli

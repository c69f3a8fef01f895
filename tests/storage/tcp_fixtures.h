// Loopback TCP stand-ins for failing servers:
//   ClosedPort     a port with nothing listening (connection refused)
//   SilentServer   accepts TCP connections (kernel backlog) and never answers
//   FreezableProxy forwards to a real server until frozen, then holds every byte, so an
//                  established connection hangs mid-call (a stalled or partitioned server)
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mongoelector::storage_test {

class ClosedPort {
 public:
  ClosedPort();
  int port() const { return port_; }

 private:
  int port_ = 0;
};

class SilentServer {
 public:
  SilentServer();
  ~SilentServer();
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class FreezableProxy {
 public:
  FreezableProxy(std::string target_host, int target_port);
  ~FreezableProxy();
  FreezableProxy(const FreezableProxy&) = delete;
  FreezableProxy& operator=(const FreezableProxy&) = delete;

  int port() const { return port_; }
  void set_frozen(bool frozen) { frozen_.store(frozen); }
  // Every byte clients sent to the server so far (the wire format of their commands).
  std::string sent() {
    std::lock_guard<std::mutex> g(sent_mu_);
    return sent_;
  }

 private:
  struct Pair {
    int client = -1;
    int server = -1;
  };
  void run();
  bool pump(int from, int to, bool to_server);  // false when `from` closed or failed

  std::string host_;
  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> frozen_{false};
  std::atomic<bool> stop_{false};
  std::vector<Pair> pairs_;  // only touched by the proxy thread
  std::mutex sent_mu_;
  std::string sent_;
  std::thread thread_;
};

}  // namespace mongoelector::storage_test

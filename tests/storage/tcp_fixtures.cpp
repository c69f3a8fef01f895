#include "tcp_fixtures.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mongoelector::storage_test {

namespace {

// A loopback listening socket on a free port.
int listen_loopback(int* port, int backlog) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("bind/listen: ") + std::strerror(err));
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

int connect_to(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string ip = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

ClosedPort::ClosedPort() {
  // Take a free port and let it go again: nothing listens there afterwards.
  int fd = listen_loopback(&port_, 1);
  ::close(fd);
}

SilentServer::SilentServer() { fd_ = listen_loopback(&port_, 64); }

SilentServer::~SilentServer() { ::close(fd_); }

FreezableProxy::FreezableProxy(std::string target_host, int target_port)
    : host_(std::move(target_host)), target_port_(target_port) {
  listen_fd_ = listen_loopback(&port_, 16);
  thread_ = std::thread([this] { run(); });
}

FreezableProxy::~FreezableProxy() {
  stop_.store(true);
  thread_.join();
  for (auto& p : pairs_) {
    ::close(p.client);
    ::close(p.server);
  }
  ::close(listen_fd_);
}

bool FreezableProxy::pump(int from, int to, bool to_server) {
  char buf[16384];
  ssize_t n = ::recv(from, buf, sizeof buf, 0);
  if (n <= 0) return false;
  if (to_server) {
    std::lock_guard<std::mutex> g(sent_mu_);
    sent_.append(buf, static_cast<size_t>(n));
  }
  for (ssize_t off = 0; off < n;) {
    ssize_t w = ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += w;
  }
  return true;
}

void FreezableProxy::run() {
  while (!stop_.load()) {
    const bool frozen = frozen_.load();
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    // Frozen: nothing is read, so requests and replies wait in the kernel buffers and
    // the peers see a connection that is open but silent.
    if (!frozen) {
      for (const auto& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
    }
    const size_t polled = frozen ? 0 : pairs_.size();
    if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client >= 0) {
        int server = connect_to(host_, target_port_);
        if (server < 0) {
          ::close(client);
        } else {
          pairs_.push_back({client, server});
        }
      }
    }
    if (frozen) continue;
    std::vector<Pair> alive;
    for (size_t i = 0; i < polled; ++i) {
      const pollfd& c = fds[1 + 2 * i];
      const pollfd& s = fds[2 + 2 * i];
      bool ok = true;
      if (c.revents & (POLLIN | POLLHUP | POLLERR))
        ok = pump(pairs_[i].client, pairs_[i].server, true);
      if (ok && (s.revents & (POLLIN | POLLHUP | POLLERR))) {
        ok = pump(pairs_[i].server, pairs_[i].client, false);
      }
      if (ok) {
        alive.push_back(pairs_[i]);
      } else {
        ::close(pairs_[i].client);
        ::close(pairs_[i].server);
      }
    }
    // Pairs accepted in this round were not polled yet: keep them.
    for (size_t i = polled; i < pairs_.size(); ++i) alive.push_back(pairs_[i]);
    pairs_ = std::move(alive);
  }
}

}  // namespace mongoelector::storage_test

#include "queue_place.h"

#include <algorithm>
#include <utility>

#include "../storage/storage.h"

namespace mongoelector {

QueuePlace::QueuePlace(Storage& storage, std::string collection, std::string key, std::string uuid)
    : storage_(storage),
      collection_(std::move(collection)),
      key_(std::move(key)),
      uuid_(std::move(uuid)) {}

QueueEntry QueuePlace::entry() const {
  std::lock_guard<std::mutex> g(mu_);
  return entry_;
}

std::int64_t QueuePlace::last_ticket() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_ticket_;
}

fair_queue::Standing QueuePlace::look(const std::vector<QueueEntry>& queue, std::int64_t now_ms) {
  std::lock_guard<std::mutex> g(mu_);
  const fair_queue::Standing st = fair_queue::standing(queue, uuid_, entry_.ticket, now_ms);
  ahead_ = st.ahead;
  return st;
}

bool QueuePlace::keep(const std::vector<QueueEntry>& queue, const fair_queue::Standing& st,
                      std::int64_t now_ms, std::int64_t ttl_ms,
                      const std::function<std::int64_t()>& at) {
  const QueueEntry& e = queue.at(static_cast<std::size_t>(st.own));
  if (!fair_queue::renew_due(e.expire_ms, now_ms, ttl_ms)) return false;  // waits its turn
  const std::int64_t sent_at = at();
  const std::int64_t expire = sent_at + ttl_ms;
  if (!storage_.renew_queue_entry(collection_, key_, st.own, e.uuid, e.ticket, sent_at, expire))
    return true;  // moved (an entry before it left) or expired meanwhile: read again
  std::lock_guard<std::mutex> g(mu_);
  if (entry_.ticket == e.ticket) entry_.expire_ms = std::max(entry_.expire_ms, expire);
  return false;
}

bool QueuePlace::drop_strays(const std::vector<QueueEntry>& queue, std::int64_t now_ms) {
  const std::int64_t current = entry().ticket;
  bool dropped = false;
  for (const QueueEntry& e : queue)
    if (e.uuid == uuid_ && e.ticket != current && e.live_at(now_ms))
      dropped = storage_.leave_queue(collection_, key_, e.uuid, e.ticket) || dropped;
  return dropped;
}

void QueuePlace::sending(const QueueEntry& e) {
  std::lock_guard<std::mutex> g(mu_);
  entry_ = e;
  last_ticket_ = std::max(last_ticket_, e.ticket);
}

void QueuePlace::gone(std::int64_t ticket) {
  std::lock_guard<std::mutex> g(mu_);
  if (entry_.ticket == ticket) {
    entry_ = QueueEntry{};
    ahead_ = 0;
  }
}

std::optional<QueueEntry> QueuePlace::leave(const std::string& what, const LogFields& fields) {
  QueueEntry mine;
  {
    std::lock_guard<std::mutex> g(mu_);
    mine = std::exchange(entry_, QueueEntry{});
    ahead_ = 0;
  }
  if (mine.ticket == 0) return std::nullopt;
  try {
    storage_.leave_queue(collection_, key_, mine.uuid, mine.ticket);
    return mine;
  } catch (const std::exception& ex) {
    log(LogLevel::Warning,
        "could not leave the queue of " + what +
            " (its entry expires within its ttl): " + ex.what(),
        fields);
    return std::nullopt;
  }
}

std::int64_t QueuePlace::pace_ms(std::int64_t step_ms, std::int64_t ttl_ms) const {
  std::lock_guard<std::mutex> g(mu_);
  if (entry_.ticket == 0) return step_ms;  // not queued: every step, as before
  return fair_queue::wait_ms(ahead_, step_ms, ttl_ms);
}

}  // namespace mongoelector

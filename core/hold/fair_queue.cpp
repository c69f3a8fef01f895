#include "fair_queue.h"

#include <algorithm>

namespace mongoelector::fair_queue {

Standing standing(const std::vector<QueueEntry>& queue, const std::string& uuid,
                  std::int64_t ticket, std::int64_t now_ms) {
  Standing s;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const QueueEntry& e = queue[i];
    if (!e.live_at(now_ms)) continue;
    if (ticket != 0 && e.is(uuid, ticket)) {
      s.own = static_cast<std::int64_t>(i);
      return s;
    }
    ++s.ahead;
  }
  return s;
}

Gate gate(const std::vector<QueueEntry>& queue, const std::string& uuid, std::int64_t ticket,
          std::int64_t now_ms) {
  Gate g;
  for (const QueueEntry& e : queue) {
    const bool live = e.live_at(now_ms);
    if (live && ticket != 0 && e.is(uuid, ticket)) {
      g.own = e;
      g.open = true;
      return g;
    }
    if (live) return Gate{};  // a live waiter before this claimant: never passed (Q)
    g.passed.push_back(e);
  }
  g.open = true;  // no live entry at all (an own entry, if any, expired: passed as any)
  return g;
}

std::int64_t wait_ms(std::int64_t ahead, std::int64_t step_ms, std::int64_t ttl_ms) {
  const std::int64_t cap = std::max(step_ms, ttl_ms / 3);
  if (ahead >= cap / std::max<std::int64_t>(step_ms, 1)) return cap;  // no overflow
  return std::min(cap, step_ms * (ahead + 1));
}

bool renew_due(std::int64_t expire_ms, std::int64_t now_ms, std::int64_t ttl_ms) {
  return expire_ms - now_ms < ttl_ms - ttl_ms / 3;
}

std::vector<QueueEntry> waiting(const std::vector<QueueEntry>& queue, std::int64_t now_ms) {
  std::vector<QueueEntry> out;
  for (const QueueEntry& e : queue)
    if (e.live_at(now_ms)) out.push_back(e);
  std::stable_sort(out.begin(), out.end(),
                   [](const QueueEntry& a, const QueueEntry& b) { return a.ticket < b.ticket; });
  return out;
}

}  // namespace mongoelector::fair_queue

// Priority leaders: the candidate rule (priority.h) and the election loop's side of it
// (Elector::priority_poll, Elector::transfer_to_priority). Invariants kept:
//  * One leader at a time, tokens increase, step-down before takeover: leadership moves
//    only through transfer() (handover.cpp), nothing else is written.
//  * Budgets: the read of the members is one call, started only when it fits before the
//    renew deadline, after the renewal (never inside its budget).
//  * Derive, don't flag: the delay is measured on the host's monotonic clock from the
//    first poll that saw the candidate; nothing but those polls moves it.
#include "priority.h"

#include <algorithm>
#include <cmath>

#include "../exceptions.h"
#include "elector.h"

namespace mongoelector {

std::optional<double> published_priority(const Document& member) {
  const Value* v = member.get("priority");
  if (v == nullptr) return std::nullopt;
  double p;
  if (const auto* i = std::get_if<std::int64_t>(v))
    p = static_cast<double>(*i);
  else if (const auto* d = std::get_if<double>(v))
    p = *d;
  else
    return std::nullopt;
  if (!std::isfinite(p)) return std::nullopt;
  return p;
}

std::optional<PriorityCandidate> pick_priority_candidate(const std::vector<Document>& members,
                                                         const std::string& self, double own,
                                                         std::int64_t server_now_ms,
                                                         std::int64_t live_window_ms) {
  std::optional<PriorityCandidate> best;
  for (const Document& m : members) {
    const std::string uuid = m.get_string("uuid").value_or(m.get_string("_id").value_or(""));
    if (uuid.empty() || uuid == self) continue;
    if (!m.get_bool("elector_running").value_or(false)) continue;
    const std::optional<DateTime> ts = m.get_date("timestamp");
    if (!ts || server_now_ms - ts->ms > live_window_ms) continue;
    const std::optional<double> p = published_priority(m);
    if (!p || *p <= own) continue;  // equal is never higher: a tie moves nothing
    if (!best || *p > best->priority || (*p == best->priority && uuid < best->uuid))
      best = PriorityCandidate{uuid, *p};
  }
  return best;
}

std::int64_t Elector::priority_stability_ms() const {
  if (!options_.priority_stability_s) return locker_->ttl_ms();
  return std::llround(*options_.priority_stability_s * 1000.0);
}

std::int64_t Elector::priority_live_window_ms() const {
  // A member reports at least every ttl/2 at its polls, which come every handover_poll_s
  // (ttl/4) or, without peeks, at most about a ttl apart: a report older than 1.5 ttl
  // means the member stopped polling.
  return locker_->ttl_ms() * 3 / 2;
}

std::optional<std::string> Elector::priority_poll() {
  const std::int64_t now = clock_->mono_ms();
  std::optional<PriorityCandidate> seen;
  if (options_.priority && is_leader() && fits_before_deadline(now, 1)) {
    if (const std::optional<ServerTime> t = locker_->server_clock().estimate()) {
      try {
        seen = pick_priority_candidate(
            locker_->storage().list_status(options_.status_collection, options_.key),
            locker_->identity().uuid, *options_.priority, t->now_ms, priority_live_window_ms());
      } catch (const std::exception& ex) {
        log(LogLevel::Warning,
            "reading the members of " + options_.key + " for priorities failed: " + ex.what(),
            log_fields(LogEvent::None));
      }
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  if (!seen) {
    priority_candidate_.clear();
    return std::nullopt;
  }
  if (seen->uuid != priority_candidate_) {
    priority_candidate_ = seen->uuid;
    priority_since_ = now;
  }
  const std::int64_t due = priority_since_ + priority_stability_ms();
  if (now >= due) return priority_candidate_;
  next_poll_mono_ = std::min(next_poll_mono_, due);  // look again when the delay is over
  return std::nullopt;
}

void Elector::transfer_to_priority(const std::string& to_uuid) {
  {
    std::lock_guard<std::mutex> g(mu_);
    priority_candidate_.clear();
  }
  log(LogLevel::Info,
      "a live member of higher priority (" + to_uuid + ") has been seen for " +
          std::to_string(priority_stability_ms()) + " ms: handing " + options_.key + " over",
      log_fields(LogEvent::None));
  try {
    transfer(to_uuid);
  } catch (const std::exception& ex) {
    // Not leader any more, the member left, or the write failed (the loop settles the
    // hold, as after any failed transfer()).
    log(LogLevel::Warning, "priority hand-over of " + options_.key + " failed: " + ex.what(),
        log_fields(LogEvent::None));
  }
}

void Elector::validate_priority_options() const {
  if (options_.priority && !std::isfinite(*options_.priority))
    throw InvalidArgument("priority must be a finite number, got " +
                          std::to_string(*options_.priority));
  if (options_.priority_stability_s &&
      (!std::isfinite(*options_.priority_stability_s) || *options_.priority_stability_s < 0 ||
       *options_.priority_stability_s > 1e9))
    throw InvalidArgument(
        "priority_stability must be a finite number of seconds in [0, 1e9], got " +
        std::to_string(*options_.priority_stability_s));
  if (options_.priority && !options_.report_status)
    throw InvalidArgument(
        "priority needs report_status: members find each other's priorities in their status "
        "documents");
}

}  // namespace mongoelector

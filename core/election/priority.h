// Priority leaders (opt-in: ElectorOptions::priority). The rule that picks the member a
// leader hands leadership to is written once, here, and used by the election loop only
// (bindings pass the options through):
//  * Each member with a priority publishes it in its status document ("priority"), while
//    it stands for election (not during a resign() hold-off).
//  * The leader, with a priority of its own, reads the members at its polls (one read,
//    only when it fits before the renew deadline) and picks the LIVE member of highest
//    priority strictly above its own; ties between candidates go to the smallest uuid.
//    A member of equal priority is never a candidate, so a tie never moves leadership,
//    and the member that took over never hands back to an equal one.
//  * Once the same candidate has been seen live and higher at every poll for
//    priority_stability (host monotonic clock), the leader calls transfer(): the
//    hand-over keeps every guarantee of transfer() (handover.cpp). A poll at which the
//    candidate is not seen (not live, gone, another candidate, a failed read) restarts
//    the delay.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../value.h"

namespace mongoelector {

struct PriorityCandidate {
  std::string uuid;
  double priority = 0;
};

// The priority a member's status document publishes: nullopt when it has none (a member
// without a priority, an original node) or it is not a finite number.
std::optional<double> published_priority(const Document& member);

// Live: the report says elector_running, and its timestamp is at most live_window_ms
// before server_now_ms. The member of highest published priority strictly above `own`
// among the live ones other than `self`, ties to the smallest uuid; nullopt if none.
std::optional<PriorityCandidate> pick_priority_candidate(const std::vector<Document>& members,
                                                         const std::string& self, double own,
                                                         std::int64_t server_now_ms,
                                                         std::int64_t live_window_ms);

}  // namespace mongoelector

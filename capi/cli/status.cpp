// `mongoelector status`: who holds KEY (the `run` lock and the `elect` leadership), its
// fencing token and expiry, the elector members' reports, the read-write lock's holders
// (`run --shared/--exclusive`) and, when KEY names a partition group, its members and
// each partition's owner and token.
#include "cli.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cli {

namespace {

const char* kStatusHelp =
    "Usage: mongoelector status KEY [--uri URI] [--json] [--verbose] [--partitions N]\n"
    "\n"
    "Shows KEY's lock (as taken by `mongoelector run` and the C/Python/Go/Rust lockers in\n"
    "the default collection) and its election (as run by `mongoelector elect` and the\n"
    "electors): holder host, pid and uuid, fencing token, expiry and time left (on the\n"
    "storage's clock), and the elector members with their last reports. Also, when they\n"
    "are in use: the holders of KEY's read-write lock (`run --shared`/`--exclusive` and\n"
    "the read-write locks in the default collection), the fair waiters queued for KEY's\n"
    "lock, semaphore or read-write lock (first in line first), and, when KEY is a\n"
    "partitioner's\n"
    "group, its members and each partition's owner, fencing token and assigned member.\n"
    "It only reads: read access is enough, and a SQLite file is opened read-only (never\n"
    "created).\n"
    "\n"
    "  --uri URI   mongodb://host:port/database or sqlite:///absolute/path.db (default:\n"
    "              $MONGOELECTOR_URI, else sqlite://%s)\n"
    "  --verbose   also each member's counters (acquires, renewals, step-downs, ...)\n"
    "  --partitions N  the group's number of partitions, to read its partitions when no\n"
    "              member is live (otherwise taken from the live members' reports)\n"
    "  --json      one JSON object instead of the table:\n"
    "              {\"key\", \"uri\", \"server_time_ms\",\n"
    "               \"lock\": null | {\"host\", \"pid\", \"uuid\", \"fence\", \"created_ms\",\n"
    "                                 \"expire_ms\", \"expires_in_s\"},\n"
    "               \"leader\": null | {same fields, \"payload\": null | {...}},\n"
    "               \"members\": [{\"host\", \"pid\", \"uuid\", \"is_leader\", \"running\",\n"
    "                             \"last_report_ms\", \"last_report_age_s\", \"ttl\",\n"
    "                             \"app_version\", \"metrics\": null | {\"acquires_acquired\",\n"
    "                             ..., \"renewal_failures\", \"step_downs\",\n"
    "                             \"clock_offset_ms\", \"round_trips\", ...}}],\n"
    "               \"rwlock\": [{\"side\": \"read\" | \"write\" | \"waiting_writer\",\n"
    "                            \"host\", \"pid\", \"uuid\", \"fence\", \"created_ms\",\n"
    "                            \"expire_ms\"}],\n"
    "               \"waiting\": {\"lock\": [...], \"semaphore\": [...], \"rwlock\": [...]},\n"
    "                   each [{\"uuid\", \"ticket\", \"expire_ms\", \"expires_in_s\"}]: the\n"
    "                   fair waiters still queued, first in line first\n"
    "               \"partition_group\": null | {\"group\", \"partitions\", \"settled\",\n"
    "                   \"members\": [{\"uuid\", \"host\", \"pid\", \"live\", \"running\",\n"
    "                                \"expire_ms\", \"owned\", \"assigned\"}],\n"
    "                   \"owners\": [{\"partition\", \"key\", \"owner\", \"host\", \"pid\",\n"
    "                               \"token\", \"expire_ms\", \"assigned\", \"conflict\"}],\n"
    "                   \"conflicts\": [{\"message\"}], \"server_time_ms\"}}\n"
    "              (metrics: the member process's counters at its last report)\n"
    "\n"
    "Exit status: 0 (held or not), 64 bad command line, 69 storage unreachable or\n"
    "failing, 78 URI or storage unusable.\n";

struct Holder {
  bool found = false;
  mongoelector_lock_info info{};
};

// Reads only (mongoelector_client_read_lock): status needs no write privilege, and
// creates no index, collection or database.
bool read_holder(mongoelector_client* client, const char* collection, const std::string& key,
                 Holder& out, int& ec) {
  int found = 0;
  mongoelector_lock_details d{};
  d.version = MONGOELECTOR_LOCK_DETAILS_VERSION;
  mongoelector_status st =
      mongoelector_client_read_lock(client, collection, key.c_str(), &d, &found);
  if (st != MONGOELECTOR_OK) {
    msg("cannot read the lock: %s", storage_error(st).c_str());
    ec = st == MONGOELECTOR_ERR_INVALID_ARGUMENT ? kExitUsage : exit_code_for(st);
    return false;
  }
  out.found = found != 0;
  if (out.found) {
    snprintf(out.info.uuid, sizeof out.info.uuid, "%s", d.uuid);
    snprintf(out.info.host, sizeof out.info.host, "%s", d.host);
    out.info.pid = d.pid;
    out.info.created_ms = d.created_ms;
    out.info.expire_ms = d.expire_ms;
    out.info.fence = d.fence;
  }
  mongoelector_lock_details_clear(&d);
  return true;
}

std::string holder_json(const Holder& h, int64_t now_ms, const std::string& payload = "") {
  if (!h.found) return "null";
  if (!payload.empty()) {  // the leader's: its payload as the last field
    std::string out = holder_json(h, now_ms);
    out.pop_back();
    return out + ", \"payload\": " + payload + "}";
  }
  char buf[256];
  snprintf(buf, sizeof buf,
           ", \"pid\": %" PRId64 ", \"uuid\": %s, \"fence\": %" PRId64 ", \"created_ms\": %" PRId64
           ", \"expire_ms\": %" PRId64 ", \"expires_in_s\": %.3f}",
           h.info.pid, json_quote(h.info.uuid).c_str(), h.info.fence, h.info.created_ms,
           h.info.expire_ms, static_cast<double>(h.info.expire_ms - now_ms) / 1000.0);
  return "{\"host\": " + json_quote(h.info.host) + buf;
}

std::string holder_lines(const Holder& h, int64_t now_ms, const std::string& indent) {
  if (!h.found) return "free\n";
  char buf[768];
  snprintf(buf, sizeof buf,
           "held by %s pid %" PRId64 " (uuid %s)\n%s          fence %" PRId64
           ", expires %s (in %.1f s unless renewed)\n",
           h.info.host, h.info.pid, h.info.uuid, indent.c_str(), h.info.fence,
           iso_ms(h.info.expire_ms).c_str(),
           static_cast<double>(h.info.expire_ms - now_ms) / 1000.0);
  return buf;
}

// The metrics a member's report carries (core Elector::report_document), in this order.
const char* const kStatNames[] = {"acquires_acquired",  "acquires_held",   "acquires_timeout",
                                  "acquires_cancelled", "acquires_error",  "renewals",
                                  "renewal_failures",   "leader_elected",  "leader_lost",
                                  "step_downs",         "clock_offset_ms", "clock_uncertainty_ms",
                                  "round_trips"};

// One line under a member: "acquired 3, held 1, ... round trips 120".
std::string stats_line(const std::vector<std::pair<std::string, int64_t>>& stats) {
  std::string line;
  for (const auto& [name, value] : stats) {
    std::string label = name;
    for (char& c : label)
      if (c == '_') c = ' ';
    if (label.rfind("acquires ", 0) == 0) label = label.substr(9);
    line += (line.empty() ? "" : ", ") + label + " " + std::to_string(value);
  }
  return line;
}

std::string str_of(const Json* j) { return j != nullptr && j->type == Json::String ? j->str : ""; }
bool bool_of(const Json* j) { return j != nullptr && j->type == Json::Bool && j->b; }
int64_t int_of(const Json* j) { return j != nullptr && j->type == Json::Number ? j->i : 0; }
double num_of(const Json* j) { return j != nullptr && j->type == Json::Number ? j->num : 0; }

struct RwHolder {
  std::string side, host, uuid;
  int64_t pid = 0, fence = 0, created_ms = 0, expire_ms = 0;
};

// The holders of KEY's read-write lock (the default collection, as `run --shared` uses
// it): none when nobody holds it, or when KEY's document there is another kind's.
bool read_rwlock(mongoelector_client* client, const std::string& key, std::vector<RwHolder>& out,
                 int& ec) {
  mongoelector_rwlock* rw = nullptr;
  mongoelector_rwlock_holder* h = nullptr;
  size_t n = 0;
  mongoelector_status st = mongoelector_rwlock_new(client, key.c_str(), nullptr, &rw);
  if (st == MONGOELECTOR_OK) st = mongoelector_rwlock_holders(rw, &h, &n);
  mongoelector_rwlock_free(rw);
  if (st == MONGOELECTOR_ERR_INVALID_ARGUMENT) return true;  // not a read-write lock's document
  if (st != MONGOELECTOR_OK) {
    msg("cannot read the read-write lock: %s", storage_error(st).c_str());
    ec = exit_code_for(st);
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    RwHolder x;
    x.side = mongoelector_rwlock_side_name(h[i].side);
    x.host = h[i].host != nullptr ? h[i].host : "";
    x.uuid = h[i].uuid != nullptr ? h[i].uuid : "";
    x.pid = h[i].pid;
    x.fence = h[i].fence;
    x.created_ms = h[i].created_ms;
    x.expire_ms = h[i].expire_ms;
    out.push_back(std::move(x));
  }
  mongoelector_rwlock_holders_free(h, n);
  return true;
}

// The fair waiters of KEY's lock, semaphore and read-write lock (default collections),
// as the library reads them (mongoelector_client_read_queue).
struct Waiting {
  const char* what;  // "lock", "semaphore", "rwlock"
  Json entries;      // [{"uuid", "ticket", "expire_ms"}]
};

bool read_waiting(mongoelector_client* client, const std::string& key, std::vector<Waiting>& out,
                  int& ec) {
  const std::pair<mongoelector_queue_of, const char*> kinds[] = {
      {MONGOELECTOR_QUEUE_LOCK, "lock"},
      {MONGOELECTOR_QUEUE_SEMAPHORE, "semaphore"},
      {MONGOELECTOR_QUEUE_RWLOCK, "rwlock"}};
  for (const auto& [of, what] : kinds) {
    char* text = nullptr;
    const mongoelector_status st =
        mongoelector_client_read_queue(client, of, nullptr, key.c_str(), &text);
    const std::string body = text != nullptr ? text : "";
    mongoelector_free(text);
    if (st != MONGOELECTOR_OK) {
      msg("cannot read the %s queue: %s", what, storage_error(st).c_str());
      ec = st == MONGOELECTOR_ERR_INVALID_ARGUMENT ? kExitUsage : exit_code_for(st);
      return false;
    }
    Json j;
    std::string perr;
    if (!parse_json(body, j, perr)) {
      msg("unexpected queue from the library (%s): %s", perr.c_str(), body.c_str());
      ec = kExitFailure;
      return false;
    }
    Waiting w{what, Json{}};
    if (const Json* e = j.get("waiting"); e != nullptr && e->type == Json::Array) w.entries = *e;
    out.push_back(std::move(w));
  }
  return true;
}

std::size_t waiting_count(const Waiting& w) {
  return w.entries.type == Json::Array ? w.entries.arr.size() : 0;
}

std::string waiting_json(const std::vector<Waiting>& waiting, int64_t now_ms) {
  std::string out = "{";
  for (std::size_t k = 0; k < waiting.size(); ++k) {
    out += std::string(k ? ", " : "") + json_quote(waiting[k].what) + ": [";
    for (std::size_t i = 0; i < waiting_count(waiting[k]); ++i) {
      const Json& e = waiting[k].entries.arr[i];
      char buf[160];
      snprintf(buf, sizeof buf,
               ", \"ticket\": %" PRId64 ", \"expire_ms\": %" PRId64 ", \"expires_in_s\": %.3f}",
               int_of(e.get("ticket")), int_of(e.get("expire_ms")),
               static_cast<double>(int_of(e.get("expire_ms")) - now_ms) / 1000.0);
      out += std::string(i ? ", " : "") + "{\"uuid\": " + json_quote(str_of(e.get("uuid"))) + buf;
    }
    out += "]";
  }
  return out + "}";
}

std::string waiting_lines(const std::vector<Waiting>& waiting, int64_t now_ms,
                          const std::string& indent) {
  std::string out;
  for (const Waiting& w : waiting) {
    for (std::size_t i = 0; i < waiting_count(w); ++i) {
      const Json& e = w.entries.arr[i];
      char buf[512];
      snprintf(buf, sizeof buf,
               "%-10s%-9s #%zu uuid %s, ticket %" PRId64 ", expires in %.1f s unless renewed\n",
               out.empty() ? "waiting" : "", i == 0 ? w.what : "", i + 1,
               str_of(e.get("uuid")).c_str(), int_of(e.get("ticket")),
               static_cast<double>(int_of(e.get("expire_ms")) - now_ms) / 1000.0);
      out += indent + buf;
    }
  }
  return out;
}

// KEY as a partitioner's group (the library's status object): found false when no member
// is live and `partitions` is 0 (nothing says how many partitions it has); `note` says why
// it could not be read when the live members disagree.
bool read_partition_group(mongoelector_client* client, const std::string& key, int64_t partitions,
                          Json& out, bool& found, std::string& note, int& ec) {
  found = false;
  char* text = nullptr;
  const mongoelector_status st = mongoelector_client_partition_status(
      client, key.c_str(), partitions, nullptr, nullptr, &text);
  std::string body = text != nullptr ? text : "";
  mongoelector_free(text);
  if (st == MONGOELECTOR_ERR_INVALID_ARGUMENT && partitions == 0) {
    const std::string why = mongoelector_last_error();
    if (why.find("no live member") == std::string::npos) note = why;  // e.g. they disagree
    return true;
  }
  if (st != MONGOELECTOR_OK) {
    msg("cannot read the partition group %s: %s", key.c_str(), storage_error(st).c_str());
    ec = st == MONGOELECTOR_ERR_INVALID_ARGUMENT ? kExitUsage : exit_code_for(st);
    return false;
  }
  std::string perr;
  if (!parse_json(body, out, perr)) {
    msg("unexpected partition status from the library (%s): %s", perr.c_str(), body.c_str());
    ec = kExitFailure;
    return false;
  }
  found = true;
  return true;
}

std::string rwlock_json(const std::vector<RwHolder>& holders) {
  std::string out = "[";
  for (std::size_t i = 0; i < holders.size(); ++i) {
    const RwHolder& h = holders[i];
    char buf[256];
    snprintf(buf, sizeof buf,
             ", \"pid\": %" PRId64 ", \"fence\": %" PRId64 ", \"created_ms\": %" PRId64
             ", \"expire_ms\": %" PRId64 "}",
             h.pid, h.fence, h.created_ms, h.expire_ms);
    out += std::string(i ? ", " : "") + "{\"side\": " + json_quote(h.side) +
           ", \"host\": " + json_quote(h.host) + ", \"uuid\": " + json_quote(h.uuid) + buf;
  }
  return out + "]";
}

std::string rwlock_lines(const std::vector<RwHolder>& holders, int64_t now_ms,
                         const std::string& indent) {
  std::string out;
  for (std::size_t i = 0; i < holders.size(); ++i) {
    const RwHolder& h = holders[i];
    char buf[768];
    snprintf(buf, sizeof buf,
             "%s%-15s by %s pid %" PRId64 " (uuid %s), fence %" PRId64 ", expires in %.1f s\n",
             i == 0 ? "rwlock    " : "          ", h.side.c_str(), h.host.c_str(), h.pid,
             h.uuid.c_str(), h.fence, static_cast<double>(h.expire_ms - now_ms) / 1000.0);
    out += indent + buf;
  }
  return out;
}

// A uuid's first 8 characters ("-" for none), as the members table shows it.
std::string short_uuid(const Json* j) {
  if (j == nullptr || j->type != Json::String) return "-";
  return j->str.substr(0, 8);
}

std::string partition_lines(const Json& g, const std::string& indent) {
  std::string out;
  char buf[768];
  const Json* owners = g.get("owners");
  const Json* members = g.get("members");
  snprintf(buf, sizeof buf, "partitions %" PRId64 " in group %s, %s\n", int_of(g.get("partitions")),
           str_of(g.get("group")).c_str(),
           bool_of(g.get("settled"))
               ? "settled (each held by its assigned member)"
               : "moving (not every partition is held by its assigned member)");
  out += indent + buf;
  snprintf(buf, sizeof buf, "%s  members  %-20s %8s  %-8s  %-7s %5s %8s\n", indent.c_str(), "HOST",
           "PID", "UUID", "STATE", "OWNED", "ASSIGNED");
  out += buf;
  if (members != nullptr && members->type == Json::Array) {
    for (const Json& m : members->arr) {
      const char* state = bool_of(m.get("live"))      ? "live"
                          : bool_of(m.get("running")) ? "expired"
                                                      : "left";
      snprintf(buf, sizeof buf,
               "%s           %-20s %8" PRId64 "  %-8s  %-7s %5" PRId64 " %8" PRId64 "\n",
               indent.c_str(), str_of(m.get("host")).c_str(), int_of(m.get("pid")),
               short_uuid(m.get("uuid")).c_str(), state, int_of(m.get("owned")),
               int_of(m.get("assigned")));
      out += buf;
    }
  }
  snprintf(buf, sizeof buf, "%s  %-9s %-40s %12s  %s\n", indent.c_str(), "PARTITION", "OWNER",
           "TOKEN", "ASSIGNED");
  out += buf;
  if (owners != nullptr && owners->type == Json::Array) {
    for (const Json& o : owners->arr) {
      std::string owner = "free";
      if (const Json* u = o.get("owner"); u != nullptr && u->type == Json::String) {
        snprintf(buf, sizeof buf, "%s pid %" PRId64 " (%s)", str_of(o.get("host")).c_str(),
                 int_of(o.get("pid")), u->str.substr(0, 8).c_str());
        owner = buf;
      }
      if (const Json* c = o.get("conflict"); c != nullptr && c->type == Json::String)
        owner = "not a partition: " + c->str;
      snprintf(buf, sizeof buf, "%s  %9" PRId64 " %-40s %12" PRId64 "  %s\n", indent.c_str(),
               int_of(o.get("partition")), owner.c_str(), int_of(o.get("token")),
               short_uuid(o.get("assigned")).c_str());
      out += buf;
    }
  }
  if (const Json* c = g.get("conflicts"); c != nullptr && c->type == Json::Array)
    for (const Json& x : c->arr) out += indent + "  ignored  " + str_of(x.get("message")) + "\n";
  return out;
}

}  // namespace

void print_status_help() { printf(kStatusHelp, default_state_path().c_str()); }

int print_status(mongoelector_client* client, const std::string& uri, const std::string& key,
                 bool json, const std::string& indent, bool verbose, int64_t partitions) {
  int ec = 0;
  // Reads only, so that a user with read access can run it (and nothing is created).
  Holder lock, leader;
  if (!read_holder(client, kRunCollection, key, lock, ec)) return ec;
  char* detail_text = nullptr;
  mongoelector_status st = mongoelector_client_cluster_detail(client, key.c_str(), &detail_text);
  std::string detail = detail_text != nullptr ? detail_text : "";
  mongoelector_free(detail_text);
  if (st != MONGOELECTOR_OK) {
    msg("cannot read the election of %s: %s", key.c_str(), storage_error(st).c_str());
    return exit_code_for(st);
  }
  Json cd;
  std::string perr;
  if (!parse_json(detail, cd, perr)) {
    msg("unexpected cluster detail from the library (%s): %s", perr.c_str(), detail.c_str());
    return kExitFailure;
  }
  int64_t now_ms = wall_ms();
  if (const Json* ts = cd.get("timestamp"))
    if (auto ms = ts->as_date_ms()) now_ms = *ms;  // the storage's clock

  if (!read_holder(client, kElectCollection, key, leader, ec)) return ec;
  // The leader's payload, from the cluster detail's read of the lock: shown only when that
  // read names the same leader as the one read above.
  std::string payload = "null";
  if (const Json* l = cd.get("leader"); l != nullptr && l->type == Json::Object && leader.found &&
                                        str_of(l->get("uuid")) == leader.info.uuid)
    if (const Json* p = l->get("payload"); p != nullptr && p->type == Json::Object)
      payload = json_text(*p);
  struct Member {
    std::string host, uuid, app;
    int64_t pid = 0, last_ms = 0;
    bool leader = false, running = false, has_last = false, has_priority = false;
    double priority = 0;  // priority leaders: published by members that have one
    double ttl = 0;
    // The member process's metrics from its last report (stat_* fields), when it sent them.
    std::vector<std::pair<std::string, int64_t>> stats;
  };
  std::vector<Member> members;
  if (const Json* md = cd.get("member_detail"); md != nullptr && md->type == Json::Array) {
    for (const Json& m : md->arr) {
      Member x;
      x.host = str_of(m.get("host"));
      x.uuid = str_of(m.get("uuid"));
      x.app = str_of(m.get("app_version"));
      x.pid = int_of(m.get("pid"));
      x.leader = bool_of(m.get("is_leader"));
      x.running = bool_of(m.get("elector_running"));
      x.ttl = num_of(m.get("ttl"));
      if (const Json* p = m.get("priority"); p != nullptr && p->type == Json::Number) {
        x.has_priority = true;
        x.priority = p->num;
      }
      for (const char* name : kStatNames) {
        if (const Json* v = m.get(std::string("stat_") + name);
            v != nullptr && v->type == Json::Number)
          x.stats.emplace_back(name, v->i);
      }
      // A report says "leader" until the node's next one: trust it only while its uuid
      // holds the leadership now.
      x.leader = x.leader && leader.found && x.uuid == leader.info.uuid;
      if (const Json* ts = m.get("timestamp"))
        if (auto ms = ts->as_date_ms()) {
          x.last_ms = *ms;
          x.has_last = true;
        }
      members.push_back(std::move(x));
    }
  }

  std::vector<RwHolder> rw;
  if (!read_rwlock(client, key, rw, ec)) return ec;
  std::vector<Waiting> waiting;
  if (!read_waiting(client, key, waiting, ec)) return ec;
  bool anyone_waiting = false;
  for (const Waiting& w : waiting) anyone_waiting = anyone_waiting || waiting_count(w) > 0;
  Json group;
  bool is_group = false;
  std::string group_note;
  if (!read_partition_group(client, key, partitions, group, is_group, group_note, ec)) return ec;

  std::string out;
  if (json) {
    out = "{\"key\": " + json_quote(key) + ", \"uri\": " + json_quote(redact_uri(uri)) +
          ", \"server_time_ms\": " + std::to_string(now_ms) +
          ", \"lock\": " + holder_json(lock, now_ms) +
          ", \"leader\": " + holder_json(leader, now_ms, payload) + ", \"members\": [";
    for (std::size_t i = 0; i < members.size(); ++i) {
      const Member& m = members[i];
      char buf[256];
      snprintf(buf, sizeof buf, ", \"pid\": %" PRId64 ", \"is_leader\": %s, \"running\": %s, ",
               m.pid, m.leader ? "true" : "false", m.running ? "true" : "false");
      out += std::string(i ? ", " : "") + "{\"host\": " + json_quote(m.host) + buf +
             "\"uuid\": " + json_quote(m.uuid) +
             ", \"last_report_ms\": " + (m.has_last ? std::to_string(m.last_ms) : "null") +
             ", \"last_report_age_s\": ";
      if (m.has_last) {
        snprintf(buf, sizeof buf, "%.3f", static_cast<double>(now_ms - m.last_ms) / 1000.0);
        out += buf;
      } else {
        out += "null";
      }
      snprintf(buf, sizeof buf, ", \"ttl\": %g, \"app_version\": ", m.ttl);
      out += buf + (m.app.empty() ? std::string("null") : json_quote(m.app)) + ", \"priority\": ";
      if (m.has_priority) {
        snprintf(buf, sizeof buf, "%.15g", m.priority);
        out += buf;
      } else {
        out += "null";
      }
      out += ", \"metrics\": ";
      if (m.stats.empty()) {
        out += "null}";
      } else {
        out += "{";
        for (std::size_t k = 0; k < m.stats.size(); ++k)
          out += std::string(k ? ", " : "") + json_quote(m.stats[k].first) + ": " +
                 std::to_string(m.stats[k].second);
        out += "}}";
      }
    }
    out += "], \"rwlock\": " + rwlock_json(rw) + ", \"waiting\": " + waiting_json(waiting, now_ms) +
           ", \"partition_group\": " + (is_group ? json_text(group) : std::string("null")) + "}\n";
  } else {
    out += indent + "key       " + key + "\n";
    out += indent + "storage   " + redact_uri(uri) + "\n";
    // A key serves as a lock (run, lockers), an election (elect, electors), or neither
    // yet: say which part is not in use rather than "free" next to a busy other part.
    const bool election_used = leader.found || !members.empty();
    // Used as a read-write lock or a partition group only: the lock and the election
    // are said unused, not "free".
    const bool other_used = is_group || !rw.empty() || anyone_waiting;
    out += indent + "lock      " +
           (lock.found || (!election_used && !other_used) ? holder_lines(lock, now_ms, indent)
                                                          : "not used as a lock\n");
    if (!election_used && (lock.found || other_used)) {
      out += indent + "election  not used for an election\n";
    } else if (!election_used) {
      out += indent + "leader    free\n";
      out += indent + "members   none\n";
    } else {
      out += indent + "leader    " +
             (leader.found ? holder_lines(leader, now_ms, indent) : "none (no member leads now)\n");
      if (payload != "null") out += indent + "payload   " + payload + "\n";
      char buf[512];
      snprintf(buf, sizeof buf, "%smembers   %-20s %8s  %-8s  %-9s %-12s %s\n", indent.c_str(),
               "HOST", "PID", "UUID", "ROLE", "LAST REPORT", "APP");
      out += buf;
      for (const Member& m : members) {
        std::string role = !m.running ? "stopped" : m.leader ? "leader" : "follower";
        std::string age = "never";
        if (m.has_last) {
          double a = static_cast<double>(now_ms - m.last_ms) / 1000.0;
          char ab[32];
          snprintf(ab, sizeof ab, "%.1f s ago", a);
          age = ab;
          if (m.running && m.ttl > 0 && a > 3 * m.ttl) role = "gone?";
        }
        snprintf(buf, sizeof buf, "%s          %-20s %8" PRId64 "  %-8.8s  %-9s %-12s %s\n",
                 indent.c_str(), m.host.c_str(), m.pid, m.uuid.c_str(), role.c_str(), age.c_str(),
                 m.app.c_str());
        out += buf;
        if (m.has_priority) {
          snprintf(buf, sizeof buf, "%s            priority %g\n", indent.c_str(), m.priority);
          out += buf;
        }
        if (verbose && !m.stats.empty())
          out += indent + "            " + stats_line(m.stats) + "\n";
      }
    }
    out += rwlock_lines(rw, now_ms, indent);
    out += waiting_lines(waiting, now_ms, indent);
    if (is_group) out += partition_lines(group, indent);
    if (!group_note.empty()) out += indent + "partitions cannot be shown: " + group_note + "\n";
  }
  fputs(out.c_str(), stdout);
  fflush(stdout);
  return kExitOk;
}

int cmd_status(int argc, char** argv) {
  Args a;
  int ec = 0;
  if (!parse_args("status", argc, argv, 2, {"uri", "partitions"}, {"json", "verbose"}, 1, false, a,
                  ec))
    return ec;
  if (a.help) {
    print_status_help();
    return kExitOk;
  }
  if (a.positional.empty()) return usage_error("status", "missing KEY");
  int64_t partitions = 0;
  if (auto it = a.values.find("partitions"); it != a.values.end()) {
    char* end = nullptr;
    errno = 0;
    const long long n = strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || errno != 0 || n < 1 ||
        n > MONGOELECTOR_PARTITIONS_MAX)
      return usage_error("status", "--partitions must be a whole number in [1, " +
                                       std::to_string(MONGOELECTOR_PARTITIONS_MAX) + "], got '" +
                                       it->second + "'");
    partitions = n;
  }
  std::string uri;
  if (!resolve_uri(a, uri, ec)) return ec;
  // Read-only: status needs no write permission, and never creates a SQLite file.
  ClientPtr client = open_client(uri, ec, /*read_only=*/true);
  if (!client) return ec;
  return print_status(client.get(), uri, a.positional[0], a.flags.count("json") != 0, "",
                      a.flags.count("verbose") != 0, partitions);
}

}  // namespace cli

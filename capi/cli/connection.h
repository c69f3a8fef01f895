// Which storage the command uses and how it opens it. The URI is parsed by the library
// (mongoelector_client_new: backend, database, path; the rules of every binding); the
// command only supplies its default database when a MongoDB URI names none.
#pragma once

#include <mongoelector.h>

#include <memory>
#include <string>

#include "options.h"

namespace cli {

// --uri, else $MONGOELECTOR_URI, else sqlite:/// + default_state_path() (its directory
// created). Prints the error and returns false when the default path cannot be made.
// --uri, else $MONGOELECTOR_URI, else the per-user SQLite file. With say_host_only, falling
// back to that file is said once on stderr: it locks this host only, and a command meant
// to run on one host of many would silently run on each.
bool resolve_uri(const Args& args, std::string& uri, int& exit_code, bool say_host_only = false);
// $XDG_STATE_HOME/mongoelector/locks.db or ~/.local/state/mongoelector/locks.db.
std::string default_state_path();
// Display helpers only (the library decides what a URI means): the URI with any
// password replaced by "***" for messages and status, and whether it looks like a
// SQLite one (which hint to print, how often to poll).
std::string redact_uri(const std::string& uri);
bool is_sqlite_uri(const std::string& uri);

// Exit code for a failed library call.
int exit_code_for(mongoelector_status st);
// Sends the library's warnings and errors to stderr as "mongoelector[pid]: warning: ...".
void install_log_callback();
// Whether the library logged a warning or an error on the calling thread since the last
// call (an elector's poll cycle that failed somewhere says so in the log); clears it.
bool take_logged_trouble();
struct ClientDeleter {
  void operator()(mongoelector_client* c) const { mongoelector_client_free(c); }
};
struct LockerDeleter {
  void operator()(mongoelector_locker* l) const { mongoelector_locker_free(l); }
};
using ClientPtr = std::unique_ptr<mongoelector_client, ClientDeleter>;
using LockerPtr = std::unique_ptr<mongoelector_locker, LockerDeleter>;
// Opens the client (mongoelector_client_new, or _new_read_only for a reader such as
// `status`, parses the URI); on failure prints what was
// wrong and what to do. memory:// is refused: it cannot lock between processes.
ClientPtr open_client(const std::string& uri, int& exit_code, bool read_only = false);
// The collection `run` locks in (the C API's default) and the elector's.
constexpr const char* kRunCollection = "mongolocker";
constexpr const char* kElectCollection = "elector.locks";
// fair: FIFO among fair lockers of KEY (blocking waiters served in arrival order).
LockerPtr open_locker(mongoelector_client* client, const std::string& key, const char* collection,
                      double ttl, int& exit_code, bool fair = false);
// Says why a locker (or read-write lock) could not be made (its status `st`: a bad key
// or option, an unsafe server, the storage) and what to do (`hint`: a line about the
// options, may be ""); returns the exit code.
int report_open_failure(mongoelector_status st, const char* hint);
// The library's last error, for the user: a storage no server of which answered becomes
// "cannot reach URI: no server answered within N s (reason)" (the URI given to
// open_client, N measured from then), without the driver command that found out.
std::string storage_error(mongoelector_status st);

}  // namespace cli

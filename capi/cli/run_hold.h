// What `mongoelector run` holds while CMD runs, behind one interface, so that the command's
// main loop (wait, spawn, watch the lease, stop CMD on loss, release) is written once:
//  * RunLock: the lock KEY (a locker's keep-alive lease), with --min-hold and --once-per;
//  * RunRwLock: one side of the read-write lock KEY (a read-write lock's keep-alive
//    lease): --shared takes the read side (many holders at once), --exclusive the write
//    side (one holder, no readers; a waiting one stops new readers).
// The lock KEY and the read-write lock KEY are different objects (their own collections):
// `run KEY` does not exclude `run --shared KEY`.
#pragma once

#include <mongoelector.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cli {

// The fields of /leader (serve.h) for one holder of KEY: who holds it, as last read
// (`run` of a lock, `elect`); `status` says what it is ("held", "leads", ...).
std::string leader_fields(const std::string& key, const std::string& status, bool found,
                          const std::string& uuid, const std::string& host, int64_t pid,
                          int64_t fence, int64_t expire_ms, int64_t server_ms,
                          const std::string& error, const std::string& payload_json = "");

class RunHold {
 public:
  virtual ~RunHold() = default;
  // The key, and what of it is held, for messages: "KEY", "KEY for reading".
  virtual std::string name() const = 0;
  // Takes the hold and keeps it alive (a keep-alive lease): `how` says whether to wait,
  // how long and its cancel token; on_lost as mongoelector_lease_acquire_with's.
  virtual mongoelector_status take(const mongoelector_acquire_options& how,
                                   mongoelector_lease_lost_fn on_lost, void* user_data) = 0;
  // The lease's fencing token, and whether it is lost (local reads).
  virtual int64_t fence() const = 0;
  virtual bool lost() const = 0;
  // Stops the lease and releases the hold (fenced; not a lost one). Idempotent.
  virtual void let_go() = 0;
  // Who holds the key against this hold, as "held by HOST pid PID (fence F, ...)"; "" when
  // nobody (or unreadable). One read.
  virtual std::string holder() = 0;
  // The fields of /leader: the key's holders, as last read (one read).
  virtual std::string leader_fields() = 0;
  // This holder's identity.
  virtual std::string uuid() const = 0;
  // CMD's environment besides MONGOELECTOR_KEY and MONGOELECTOR_FENCE.
  virtual std::vector<std::pair<std::string, std::string>> env() const { return {}; }
};

// The lock KEY in `collection` (`run`'s lock). Its locker and lease for --min-hold and
// --once-per.
class RunLock : public RunHold {
 public:
  // Null (message printed, exit_code set) when the locker cannot be made.
  // fair: wait in KEY's queue, served in arrival order (--fair).
  static std::unique_ptr<RunLock> open(mongoelector_client* client, const std::string& key,
                                       const char* collection, double ttl, bool fair,
                                       int& exit_code);
  ~RunLock() override;
  std::string name() const override { return key_; }
  mongoelector_status take(const mongoelector_acquire_options& how,
                           mongoelector_lease_lost_fn on_lost, void* user_data) override;
  int64_t fence() const override;
  bool lost() const override;
  void let_go() override;
  std::string holder() override;
  std::string leader_fields() override;
  std::string uuid() const override;
  mongoelector_locker* locker() const { return locker_; }
  mongoelector_lease* lease() const { return lease_; }

 private:
  RunLock() = default;
  mongoelector_client* client_ = nullptr;
  std::string key_;
  const char* collection_ = nullptr;
  mongoelector_locker* locker_ = nullptr;
  mongoelector_lease* lease_ = nullptr;
};

// The `side` (READ or WRITE) of the read-write lock KEY, in the library's default
// collection for read-write locks; max_readers NULL: the library's default (any other
// value is the library's to check).
class RunRwLock : public RunHold {
 public:
  static std::unique_ptr<RunRwLock> open(mongoelector_client* client, const std::string& key,
                                         mongoelector_rwlock_side side, const int64_t* max_readers,
                                         double ttl, bool fair, int& exit_code);
  ~RunRwLock() override;
  std::string name() const override;
  mongoelector_status take(const mongoelector_acquire_options& how,
                           mongoelector_lease_lost_fn on_lost, void* user_data) override;
  int64_t fence() const override;
  bool lost() const override;
  void let_go() override;
  std::string holder() override;
  std::string leader_fields() override;
  std::string uuid() const override;
  std::vector<std::pair<std::string, std::string>> env() const override;

 private:
  RunRwLock() = default;
  std::string key_;
  mongoelector_rwlock_side side_ = MONGOELECTOR_RWLOCK_READ;
  mongoelector_rwlock* rwlock_ = nullptr;
  mongoelector_rwlock_lease* lease_ = nullptr;
};

}  // namespace cli

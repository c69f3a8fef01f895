// The storage interface: only the semantic operations the lock protocol needs.
// One implementation per backend in core/storage/ (memory, MongoDB via libmongoc) and,
// from the Python package, one that calls a pymongo Database.
//
// Document schema (shared with the original pure-Python mongoelector so that old and new
// nodes can run on the same collections during a rolling upgrade):
//   lock:   {_id: key, locked: bool, host, uuid, pid, ts_created: date, ts_expire: date,
//            fence: int64}             (fence is ours; original nodes ignore it)
//   epoch:  {_id: key, epoch: int64}   in "<lock collection>.fences": the fencing
//            high-water mark, which survives deletion of the lock document.
//   status: {_id: node uuid, key, ..., timestamp: date}   (elector.leader_status)
//
// Every time passed in or out is a server-time instant (ms since the Unix epoch on the
// SERVER's clock, see server_clock.h), never the host's wall clock.
//
// Errors: backends throw StorageUnavailable when the server cannot be reached or a call
// times out, StorageError for any other failure (exceptions.h). Bindings may throw their own
// exception types (Python re-raises pymongo's exceptions unchanged); core/ lets
// exceptions it does not know propagate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clock.h"
#include "value.h"

namespace mongoelector {

class ClockSampleBoard;  // server_clock.h

// A lock document as read from the database.
struct LockDoc {
  std::string key;
  bool locked = false;
  std::string host;
  std::string uuid;
  std::int64_t pid = 0;
  std::optional<DateTime> ts_created;
  std::optional<DateTime> ts_expire;
  std::int64_t fence = 0;  // 0 when the field is absent (document of an original node)
  Document raw;            // every field as stored, for get_current()

  // Tokens are epoch << 32 | n (locker.h): a fence below this is not a token yet (a
  // claim between its write and its epoch's, or a lazy_token hold never asked for one).
  static constexpr std::int64_t kEpochUnit = std::int64_t{1} << 32;

  // Parses a raw document; missing or odd-typed fields take their defaults.
  static LockDoc from_document(const Document& raw);
  // Held by someone at server time `now_ms`: locked and not yet expired.
  bool held_at(std::int64_t now_ms) const;
};

// What an acquiring node writes into the lock document.
struct LockClaim {
  std::string key;
  std::string uuid;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t now_ms = 0;     // becomes ts_created
  std::int64_t expire_ms = 0;  // becomes ts_expire
};

// ---- Semaphores (core/semaphore/semaphore.h): N holders of one key ---------------------
//
// One document per key in the semaphore collection (default "mongosemaphore"), with a
// FIXED array of `limit` slots, created with the document and never resized:
//   {_id: key, limit: int64, fence: int64,
//    slots: [{uuid, host, pid, fence, ts_created: date, ts_expire: date}, ...]}
// A slot is free when it is NOT (ts_expire > now) -- empty slots (uuid "", fence 0,
// dates at the epoch), released ones and expired ones alike. The document's `fence` is
// the key's token counter: every claim sets it from old_fence to new_fence in the same
// atomic write that fills a slot (compare-and-set on `fence`), so tokens strictly
// increase across all slots. The epoch high-water mark is bump_epoch's
// "<collection>.fences", as for locks. Slots are addressed by index ("slots.2.uuid"):
// mongo-java-server 1.47 rejects the positional operator after $elemMatch, and mongomock
// resolves `$` to the wrong element.

// One slot of a semaphore document.
struct SemaphoreSlot {
  std::string uuid;  // "" when empty
  std::string host;
  std::int64_t pid = 0;
  std::int64_t fence = 0;  // the hold's token (0 when empty)
  std::optional<DateTime> ts_created;
  std::optional<DateTime> ts_expire;
  // Held at server time `now_ms`: ts_expire > now (the negation of the claim filter).
  bool held_at(std::int64_t now_ms) const {
    return ts_expire.has_value() && ts_expire->ms > now_ms;
  }
};

// A semaphore document as read from the database. Missing or odd-typed fields take
// their defaults (limit 0, fence 0, no slots): the Semaphore refuses such a document.
struct SemaphoreDoc {
  std::string key;
  std::int64_t limit = 0;
  std::int64_t fence = 0;
  std::vector<SemaphoreSlot> slots;
};

// One renewal of a batch (Storage::renew_semaphores): what renew_semaphore() takes.
struct SemaphoreRenewRequest {
  std::string key;
  std::int64_t slot = 0;
  std::string uuid;
  std::int64_t fence = 0;
  std::int64_t expire_ms = 0;  // the slot's new ts_expire, at least (monotonic)
  // The document, read after the batch's write, shows this slot kept at least as long
  // as asked: slot `slot` is {uuid, fence} with ts_expire >= expire_ms. Sound for the
  // reasons RenewRequest::renewed_by gives (only its holder shortens or empties a slot,
  // after letting go; a claim changes the slot's fence for good).
  bool renewed_by(const SemaphoreDoc& doc) const;
};

// What a claiming node writes: slot `slot` becomes {uuid, host, pid, fence: new_fence,
// ts_created: now_ms, ts_expire: expire_ms}, the document's fence new_fence.
struct SemaphoreClaim {
  std::string key;
  std::int64_t limit = 0;
  std::int64_t slot = 0;
  std::int64_t old_fence = 0;  // claim_semaphore: the document's fence must be this
  std::int64_t new_fence = 0;
  std::string uuid;
  std::string host;
  std::int64_t pid = 0;
  std::int64_t now_ms = 0;
  std::int64_t expire_ms = 0;
};

// One renewal of a batch (Storage::renew_many): what renew() takes for one key.
struct RenewRequest {
  std::string key;
  std::string uuid;
  std::int64_t fence = 0;      // 0: do not check the fence
  std::int64_t expire_ms = 0;  // the new ts_expire, at least (renewals are monotonic)
  // The document, read after the batch's write, shows this hold kept at least as long as
  // asked: locked, same uuid (and fence), ts_expire >= expire_ms. Sound because every
  // write that names a hold either only moves its expiry later (renewals, $max) or is
  // sent by its holder after it let go of the hold (release, set_expiry): so the server
  // frees this hold no earlier than expire_ms, and nobody else held it in between (a
  // claim or hand-over changes the fence for good). Whether it was THIS request's write
  // that did it (or a newer renewal of the same hold that landed first) does not matter
  // to the holder, whose lease counts from this request's send and ends before
  // expire_ms.
  bool renewed_by(const LockDoc& doc) const;
  // For backends that edit documents themselves (memory, SQLite): renew()'s filter and
  // monotonic write on `doc` at server time now_ms. If doc is {locked: true, uuid, fence
  // (unless 0)} and unexpired (ts_expire > now_ms), sets ts_expire = max(ts_expire,
  // expire_ms) and returns true (matched, also when it was already later); else false,
  // doc untouched. With `exact`, Storage::set_expiry's write: ts_expire = expire_ms.
  bool apply_to(Document& doc, std::int64_t now_ms, bool exact = false) const;
};

// The updates one renew_many chunk [from, to) needs on a document server: requests
// grouped by (expire_ms, fence checked), each group one multi update filtered by $in
// lists of its keys, uuids (and fences). Those match the documents renew() would: a uuid
// belongs to ONE locker, whose key is fixed, so a document of these keys carrying one of
// these uuids carries its own request's uuid; a fence of another request can only match
// a newer hold of the same locker, which the read-back does not count as renewed (that
// hold merely lives longer). Servers that match an $or clause by clause against every
// document (mongo-java-server: 1000 clauses over 5000 documents ~1 s) stay fast.
struct RenewGroup {
  std::int64_t expire_ms = 0;
  bool fenced = true;
  std::vector<std::size_t> members;  // indexes into the requests
};
std::vector<RenewGroup> renew_groups(const std::vector<RenewRequest>& requests, std::size_t from,
                                     std::size_t to);

// What the server says it is.
struct ServerInfo {
  std::string name;     // "MongoDB", "FerretDB", "mongo-java-server", ...
  std::string version;  // as reported
  // True only for MongoDB proper, whose findAndModify is atomic. Servers that emulate
  // the protocol may read-then-write (FerretDB does): see Locker's safety check.
  bool atomic_find_and_modify = false;
};

// For backends that edit documents themselves (memory, SQLite): set_fence's filter and
// write on `doc`. False (doc untouched) unless it is {uuid, fence: old_fence, ts_created:
// created_ms}.
bool set_fence_on(Document& doc, const std::string& uuid, std::int64_t old_fence,
                  std::int64_t created_ms, std::int64_t new_fence);

class Storage;
// `*storage`, or InvalidArgument for a null one (before anything binds a reference to it).
Storage& require_storage(const std::shared_ptr<Storage>& storage);
// `given`, or else the storage's clock (Storage::clock()); nullptr for a null storage.
std::shared_ptr<Clock> clock_or_storage_clock(std::shared_ptr<Clock> given,
                                              const std::shared_ptr<Storage>& storage);

class Storage {
 public:
  virtual ~Storage() = default;

  virtual ServerInfo server_info() = 0;

  // The clock that lockers, electors and leases on this storage run on when none is
  // given: the system clock, or a memory:// backend's ManualClock (testing kit).
  virtual std::shared_ptr<Clock> clock() { return system_clock(); }

  // The longest one call can take before it fails (connection, selection and socket
  // timeouts together), or 0 when unknown. The elector never starts a renewal that
  // could still be running at its renew deadline; lockers and electors refuse a storage
  // with an unknown bound unless allow_unbounded_calls is set.
  virtual std::int64_t call_bound_ms() const { return 0; }

  // The server's clock: `localTime` from hello/serverStatus, in ms. One round trip.
  virtual std::int64_t server_time_ms() = 0;

  // TTL index {ts_expire: 1}, expireAfterSeconds 0 (clean-up only; the protocol never
  // waits for it). A server that rejects TTL indexes is tolerated: log one warning.
  // If an index of another spec exists, drop the collection's indexes and retry once,
  // as the original does.
  virtual void ensure_lock_indexes(const std::string& collection) = 0;

  // One atomic round trip: takes the lock when it is absent, released (locked false) or
  // expired at claim.now_ms (ts_expire <= now) -- or, with `force`, whatever its state --
  // writing the claim's fields and incrementing `fence` by one ($inc: an absent
  // document or field starts from 0, so gets 1). Returns the document after the write.
  // Returns nullopt when another holds the lock (the conditional upsert turns into an
  // insert that fails with a duplicate-key error, E11000).
  virtual std::optional<LockDoc> claim(const std::string& collection, const LockClaim& claim,
                                       bool force) = 0;

  // Increments and returns the epoch of `key` in "<collection>.fences" (upsert, starts
  // at 1). Only on the rare path where a lock document had to be created.
  virtual std::int64_t bump_epoch(const std::string& collection, const std::string& key) = 0;

  // Sets fence = new_fence if the lock is still {locked: true, uuid, fence: old_fence,
  // ts_created: created_ms}. True if matched. ts_created names the claim (and so the
  // document's incarnation): after a deletion the counter restarts, and {uuid, old_fence}
  // alone would let a late fence change of an earlier hold land on a new one
  // (set_fence_on). `locked` makes the token a proof that the hold was still live: a
  // late release of an earlier incarnation with the same counter fence may have freed
  // this one, and a token must never be handed out for a hold that is gone.
  virtual bool set_fence(const std::string& collection, const std::string& key,
                         const std::string& uuid, std::int64_t old_fence, std::int64_t created_ms,
                         std::int64_t new_fence) = 0;

  // Renewal: if the lock is {locked: true, uuid, fence} and unexpired (ts_expire >
  // now_ms), moves ts_expire to expire_ms unless it is later already (MONOTONIC: $max,
  // never lowered). fence == 0 means "do not check fence". True if matched, including
  // "matched but already later". Why monotonic: a renewal that timed out at the client
  // may run at the server after a newer one of the same hold, whose filter it still
  // matches; lowering the expiry then would free the lock while its holder counts on the
  // newer lease. A renewal that lands late can therefore only extend its hold.
  virtual bool renew(const std::string& collection, const std::string& key, const std::string& uuid,
                     std::int64_t fence, std::int64_t now_ms, std::int64_t expire_ms) = 0;

  // The one write that may LOWER a held lock's expiry (Locker::release_min_hold): if the
  // lock is {locked: true, uuid, fence} and unexpired (ts_expire > now_ms), sets
  // ts_expire = expire_ms exactly, earlier or later. fence == 0: not checked (only for a
  // hold of unknown fence). True if matched. Safe only when sent by a holder that has
  // ALREADY let go of the hold locally (and never takes it back with this fence): a
  // renewal still in flight then cannot make it count on a lease this write cuts short,
  // and this write landing late cannot cut short a lease it counts on.
  // Default: StorageError (backends that do not implement it).
  virtual bool set_expiry(const std::string& collection, const std::string& key,
                          const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                          std::int64_t expire_ms);

  // Batched renewal (keep-alive leases of one client, core/lease/keepalive.h): renews
  // every request as renew() would at server time now_ms (monotonic), and returns, per
  // request in order, whether its hold is renewed. A request is reported renewed only
  // when its own hold {locked, uuid, fence} now has ts_expire >= its expire_ms
  // (RenewRequest::renewed_by); aggregate counts never decide it. Throws (like renew()) when the batch fails as a whole: the
  // caller then treats none of it as renewed. Requests name distinct keys.
  // Default: renew() one by one (a throw after some succeeded is still a throw: the
  // caller is conservative). MongoDB: one update_many per distinct expire_ms (and fence
  // rule), filtered by {_id $in, locked, uuid $in, fence $in, ts_expire > now} with
  // {$max: {ts_expire}}, then one find over the keys (2 commands for N keys of one ttl). Those $in lists may extend a
  // hold that pairs one request's key with another request's uuid or fence (never in
  // the library: a uuid is one locker's, whose key is fixed); such a hold only lives
  // longer than its holder counts on, and is not reported renewed. SQLite: one
  // transaction.
  virtual std::vector<bool> renew_many(const std::string& collection,
                                       const std::vector<RenewRequest>& requests,
                                       std::int64_t now_ms);
  // Storages with the same domain reach the same database through the same client, so
  // one renew_many on any of them may carry the renewals of all (default: this object).
  virtual const void* batch_domain() const { return this; }
  // The server-time samples shared by every storage of this client (server_clock.h), or
  // null (each locker samples on its own).
  virtual std::shared_ptr<ClockSampleBoard> clock_sample_board() { return nullptr; }
  // Largest batch renew_many takes in one go (callers split larger ones).
  virtual std::size_t max_renew_batch() const { return 1000; }
  // The batch size for a server: FerretDB evaluates large filters slowly, document by
  // document (1000 keys took 10-14 s here), so its batches stay small.
  static std::size_t renew_batch_for(const std::optional<ServerInfo>& info) {
    return info && info->name == "FerretDB" ? 50 : 1000;
  }

  // Release: if `uuid` is set, only a lock held by that uuid, and if `fence` is not 0
  // only that hold of it ({_id, uuid, fence}: a release that runs late at the server
  // cannot free a newer hold of the same owner); no uuid: any holder (force; fence is
  // then ignored). With delete_document false: sets locked=false, ts_expire=now_ms and
  // keeps the document (and so its fence); with true: deletes it, as an original node
  // does. True if a document was matched.
  virtual bool release(const std::string& collection, const std::string& key,
                       const std::optional<std::string>& uuid, std::int64_t fence,
                       std::int64_t now_ms, bool delete_document) = 0;

  // The lock document of `key`, whatever its state, or nullopt.
  virtual std::optional<LockDoc> read(const std::string& collection, const std::string& key) = 0;

  // ---- Semaphores (see SemaphoreDoc above). Every write is ONE atomic single-document
  // command (one round trip); a write that assumes a hold names it by slot, uuid AND
  // fence. Backends that do not implement them throw StorageError.

  // The semaphore document of `key`, or nullopt. One round trip.
  virtual std::optional<SemaphoreDoc> read_semaphore(const std::string& collection,
                                                     const std::string& key);
  // Inserts {_id: key, limit, fence: new_fence, slots: [limit slots]} whose slot
  // claim.slot holds the claim and the others are empty (old_fence is ignored). False
  // when a document of that key exists already (duplicate key, E11000): nothing written.
  virtual bool create_semaphore(const std::string& collection, const SemaphoreClaim& claim);
  // Compare-and-set: if the document is {_id: key, limit, fence: old_fence} and slot
  // claim.slot is free at claim.now_ms (NOT ts_expire > now_ms), writes the claim into
  // that slot and sets fence = new_fence. True if it matched (and was written).
  virtual bool claim_semaphore(const std::string& collection, const SemaphoreClaim& claim);
  // If slot `slot` is {uuid, fence} and unexpired (ts_expire > now_ms), moves its
  // ts_expire to expire_ms unless it is later already (monotonic, as renew()). True if
  // matched, including "matched but already later".
  virtual bool renew_semaphore(const std::string& collection, const std::string& key,
                               std::int64_t slot, const std::string& uuid, std::int64_t fence,
                               std::int64_t now_ms, std::int64_t expire_ms);
  // Batched renew_semaphore (keep-alive leases over semaphore slots, as renew_many for
  // locks): renews every request as renew_semaphore() would at server time now_ms
  // (monotonic) and returns, per request in order, whether its slot is renewed, decided
  // by reading the documents back (SemaphoreRenewRequest::renewed_by), never by counts.
  // Requests may name the same key (several slots of one client). Throws when the batch
  // fails as a whole: the caller then treats none of it as renewed. Default:
  // renew_semaphore() one by one. MongoDB (libmongoc and pymongo): per chunk of
  // max_renew_batch(), one unordered bulk `update` with a statement per slot ($max on
  // "slots.<i>.ts_expire", filtered by that slot's uuid, fence and expiry), then one find
  // over the keys (core/storage/commands.h). SQLite: one transaction. Memory: one call.
  virtual std::vector<bool> renew_semaphores(const std::string& collection,
                                             const std::vector<SemaphoreRenewRequest>& requests,
                                             std::int64_t now_ms);
  // If slot `slot` is {uuid, fence}, empties it (the document and its fence stay).
  // True if matched.
  virtual bool release_semaphore(const std::string& collection, const std::string& key,
                                 std::int64_t slot, const std::string& uuid, std::int64_t fence);

  // Status collection: TTL index on `timestamp` (expireAfterSeconds = ttl_s) and an
  // index on `key`; same tolerance as ensure_lock_indexes.
  virtual void ensure_status_indexes(const std::string& collection, std::int64_t ttl_s) = 0;
  // Upserts (replaces) the document whose _id is doc["_id"].
  virtual void put_status(const std::string& collection, const Document& doc) = 0;
  // Status documents whose `key` equals key, newest `timestamp` first.
  virtual std::vector<Document> list_status(const std::string& collection,
                                            const std::string& key) = 0;

  // ---- Graceful handover (Elector::transfer, core/election/handover.h) ----------------
  // What the leader writes to hand its lock to a named member.
  struct HandOver {
    std::string key;
    std::string from_uuid;        // the current holder (the caller)
    std::int64_t from_fence = 0;  // its hold's token
    std::string to_uuid;          // the member that takes over
    std::string to_host;          // "" when unknown
    std::int64_t to_pid = 0;      // 0 when unknown
    std::int64_t to_fence = 0;    // the new token: strictly greater than from_fence
    std::int64_t now_ms = 0;      // server time: becomes ts_created
    std::int64_t expire_ms = 0;   // becomes ts_expire
    // The fields the hand-over sets (the $set of document servers), in one place for
    // every backend.
    Document fields() const;
    // For backends that edit documents themselves (memory, SQLite): applies the hand-over
    // to `doc` if it matches as described below; false (doc untouched) otherwise.
    bool apply_to(Document& doc) const;
    // `doc` carries the mark of a hand-over to its current hold (handover_fence == fence).
    static bool marks(const LockDoc& doc);
    // ... and its target has not taken it yet: ts_expire is still the hand-over's
    // (handover_expire), which the target's first renewal moves later.
    static bool pending_in(const LockDoc& doc);
  };
  // ONE atomic conditional write: if the lock is {_id: key, locked: true, uuid:
  // from_uuid, fence: from_fence} and unexpired (ts_expire > now_ms), sets uuid, host,
  // pid, fence = to_fence, ts_created = now_ms, ts_expire = expire_ms, and the mark
  // handover_from = from_uuid, handover_fence = to_fence, handover_expire = expire_ms
  // (the target takes the lock only while handover_fence equals fence; a later claim's
  // $inc voids the mark; observers show the hand-over as pending while ts_expire equals
  // handover_expire). True if matched. Default (core/election/handover.cpp): StorageError.
  virtual bool hand_over(const std::string& collection, const HandOver& h);
};

}  // namespace mongoelector

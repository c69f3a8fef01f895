// Lock storage: the operations on lock documents and their fencing epochs
// (core/locker.h), one interface of the storage seam (storage.h). Every time passed in
// or out is a server-time instant (storage.h).
//
//   lock:   {_id: key, locked: bool, host, uuid, pid, ts_created: date, ts_expire: date,
//            fence: int64}             (fence is ours; original nodes ignore it)
//   epoch:  {_id: key, epoch: int64}   in "<lock collection>.fences": the fencing
//            high-water mark, which survives deletion of the lock document.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../value.h"
#include "payload_storage.h"

namespace mongoelector {

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
  // The holder's payload (payload_storage.h): JSON object text, nullopt when none.
  std::optional<std::string> payload;
  Document raw;  // every field as stored, for get_current()

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
  // An elector's claim: its payload (or null) is set in the same write
  // (payload_storage.h). nullopt (plain locks): the payload fields are left alone.
  std::optional<ClaimPayload> payload = std::nullopt;

  // The claim's fields written on `doc`, its fence becoming `fence` (claim()'s $set and
  // $inc, for backends that edit documents themselves: memory, SQLite).
  void apply_to(Document& doc, std::int64_t fence) const;
  // The document a claim creates where there was none (fence 1): what the upsert of
  // claim() inserts, and what insert_claim() writes, field for field.
  Document document() const;
  // What an insert of document() wrote (insert_claim's outcome when it succeeds).
  LockDoc inserted() const { return LockDoc::from_document(document()); }
};

// One renewal of a batch (Storage::renew_many): what renew() takes for one key.
struct RenewRequest {
  std::string key;
  std::string uuid;
  std::int64_t fence = 0;      // 0: do not check the fence
  std::int64_t expire_ms = 0;  // the new ts_expire, at least (renewals are monotonic)
  // Storage::set_expiry of a counter fence: the claim's ts_created too (0: not checked).
  std::int64_t created_ms = 0;
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
  // doc untouched. With `exact`, Storage::set_expiry's write: ts_expire = expire_ms, and
  // created_ms (unless 0) must be the document's ts_created.
  bool apply_to(Document& doc, std::int64_t now_ms, bool exact = false) const;
};

// The updates one renew_many chunk [from, to) needs on a document server: requests
// grouped by (expire_ms, fence checked), each group one multi update filtered by $in
// lists of its keys, uuids (and fences). Those match the documents renew() would: a uuid
// belongs to ONE locker, whose key is fixed, so a document of these keys carrying one of
// these uuids carries its own request's uuid; a fence of another request can only match
// a newer hold of the same locker, which the read-back does not count as renewed (that
// hold merely lives longer). A partitioner member (core/partition/) names its partitions'
// lockers, one per key, by its own uuid: a document of these keys with that uuid is a
// hold of that member on that key, and another request's fence can match there only
// another hold of that member (given up, not yet released), which likewise merely lives
// longer and is not reported renewed. Servers that match an $or clause by clause against every
// document (mongo-java-server: 1000 clauses over 5000 documents ~1 s) stay fast.
struct RenewGroup {
  std::int64_t expire_ms = 0;
  bool fenced = true;
  std::vector<std::size_t> members;  // indexes into the requests
};
std::vector<RenewGroup> renew_groups(const std::vector<RenewRequest>& requests, std::size_t from,
                                     std::size_t to);

// For backends that edit documents themselves (memory, SQLite): set_fence's filter and
// write on `doc`. False (doc untouched) unless it is {uuid, fence: old_fence, ts_created:
// created_ms}.
bool set_fence_on(Document& doc, const std::string& uuid, std::int64_t old_fence,
                  std::int64_t created_ms, std::int64_t new_fence);

class LockStorage {
 public:
  virtual ~LockStorage() = default;

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

  // claim() of an ABSENT document as a plain insert of claim.document() (fence 1): one
  // round trip the server does less work for than the conditional upsert (it is what
  // the original sends). nullopt when a document of the key exists, whatever its state
  // (E11000), and nothing is written: the caller then claims as usual. It can only ever
  // create a document, never overwrite one, so a wrong guess changes neither the holder
  // nor any token. Locker sends it where the document is likely gone (its own deleting
  // release).
  virtual std::optional<LockDoc> insert_claim(const std::string& collection,
                                              const LockClaim& claim) = 0;

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
  // and this write landing late cannot cut short a lease it counts on -- a lease of a
  // LATER hold of the same owner included: a fence below 2^32 is the document's counter,
  // which restarts when the document is deleted and re-created, so such a write also
  // names the claim's ts_created (created_ms; 0: not checked, for tokens, which no later
  // hold carries again).
  virtual bool set_expiry(const std::string& collection, const std::string& key,
                          const std::string& uuid, std::int64_t fence, std::int64_t now_ms,
                          std::int64_t expire_ms, std::int64_t created_ms) = 0;

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
  // the library: a uuid is one locker's, whose key is fixed, or one partitioner
  // member's, whose lockers are one per key: see RenewGroup); such a hold only lives
  // longer than its holder counts on, and is not reported renewed. SQLite: one
  // transaction.
  virtual std::vector<bool> renew_many(const std::string& collection,
                                       const std::vector<RenewRequest>& requests,
                                       std::int64_t now_ms);
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
  // The lock documents of `keys` (nullopt where there is none), in the order of `keys`,
  // read together: what a partition group's status reads. Default: read() one by one.
  // MongoDB: one find {_id: {$in: keys}}; SQLite: one read transaction; memory: one call.
  virtual std::vector<std::optional<LockDoc>> read_many(const std::string& collection,
                                                        const std::vector<std::string>& keys);
};

}  // namespace mongoelector

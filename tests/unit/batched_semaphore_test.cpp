// Semaphore slots kept alive by the one keep-alive lease are batched like locks: the
// Renewer carries the renewals of one client's slots in Storage::renew_semaphores, yet each
// keeps its own outcome and deadline. A Storage that forwards to MemoryStorage counts the
// calls (one renew_semaphores = one command, as a backend that implements it in one
// round trip; the default goes slot by slot):
//  * 1,000 semaphore leases cost as few commands per renew interval as 1,000 lock
//    leases (within 1.5x), none lost;
//  * a batch in which one slot was taken behind its back renews exactly the others;
//  * per-key mode (batching off) renews slot by slot, as it does locks.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fixtures.h"
#include "lease/keepalive.h"
#include "lease/lease.h"
#include "renewer_steps.h"
#include "semaphore/semaphore.h"
#include "server_clock.h"
#include "storage/semaphore_doc.h"

using namespace mongoelector;
using mongoelector::testing::CoreTest;

namespace {

// Forwards every call to a MemoryStorage and counts them by name.
class CountingStorage final : public Storage {
 public:
  explicit CountingStorage(std::shared_ptr<MemoryStorage> m) : m_(std::move(m)) {}
  std::map<std::string, std::int64_t> calls;
  std::int64_t total() const {
    std::int64_t n = 0;
    for (const auto& [op, c] : calls) n += c;
    return n;
  }

  ServerInfo server_info() override { return count("server_info"), m_->server_info(); }
  std::shared_ptr<Clock> clock() override { return m_->clock(); }
  std::int64_t call_bound_ms() const override { return m_->call_bound_ms(); }
  std::int64_t server_time_ms() override { return count("server_time_ms"), m_->server_time_ms(); }
  void ensure_lock_indexes(const std::string& c) override {
    count("ensure_lock_indexes");
    m_->ensure_lock_indexes(c);
  }
  std::optional<LockDoc> claim(const std::string& c, const LockClaim& cl, bool force) override {
    return count("claim"), m_->claim(c, cl, force);
  }
  std::optional<LockDoc> insert_claim(const std::string& c, const LockClaim& cl) override {
    return count("insert_claim"), m_->insert_claim(c, cl);
  }
  std::int64_t bump_epoch(const std::string& c, const std::string& k) override {
    return count("bump_epoch"), m_->bump_epoch(c, k);
  }
  bool set_fence(const std::string& c, const std::string& k, const std::string& u, std::int64_t o,
                 std::int64_t cr, std::int64_t n) override {
    return count("set_fence"), m_->set_fence(c, k, u, o, cr, n);
  }
  bool renew(const std::string& c, const std::string& k, const std::string& u, std::int64_t f,
             std::int64_t now, std::int64_t e) override {
    return count("renew"), m_->renew(c, k, u, f, now, e);
  }
  bool set_expiry(const std::string& c, const std::string& k, const std::string& u, std::int64_t f,
                  std::int64_t now, std::int64_t e, std::int64_t created) override {
    return count("set_expiry"), m_->set_expiry(c, k, u, f, now, e, created);
  }
  std::vector<bool> renew_many(const std::string& c, const std::vector<RenewRequest>& r,
                               std::int64_t now) override {
    return count("renew_many"), m_->renew_many(c, r, now);
  }
  const void* batch_domain() const override { return m_->batch_domain(); }
  std::shared_ptr<ClockSampleBoard> clock_sample_board() override {
    return m_->clock_sample_board();
  }
  std::size_t max_renew_batch() const override { return m_->max_renew_batch(); }
  bool release(const std::string& c, const std::string& k, const std::optional<std::string>& u,
               std::int64_t f, std::int64_t now, bool del) override {
    return count("release"), m_->release(c, k, u, f, now, del);
  }
  std::optional<LockDoc> read(const std::string& c, const std::string& k) override {
    return count("read"), m_->read(c, k);
  }
  std::optional<SemaphoreDoc> read_semaphore(const std::string& c, const std::string& k) override {
    return count("read_semaphore"), m_->read_semaphore(c, k);
  }
  bool create_semaphore(const std::string& c, const SemaphoreClaim& cl) override {
    return count("create_semaphore"), m_->create_semaphore(c, cl);
  }
  bool claim_semaphore(const std::string& c, const SemaphoreClaim& cl) override {
    return count("claim_semaphore"), m_->claim_semaphore(c, cl);
  }
  bool renew_semaphore(const std::string& c, const std::string& k, std::int64_t s,
                       const std::string& u, std::int64_t f, std::int64_t now,
                       std::int64_t e) override {
    return count("renew_semaphore"), m_->renew_semaphore(c, k, s, u, f, now, e);
  }
  bool release_semaphore(const std::string& c, const std::string& k, std::int64_t s,
                         const std::string& u, std::int64_t f) override {
    return count("release_semaphore"), m_->release_semaphore(c, k, s, u, f);
  }
  // One command: the memory backend's own (slot by slot inside, uncounted).
  std::vector<bool> renew_semaphores(const std::string& c,
                                     const std::vector<SemaphoreRenewRequest>& r,
                                     std::int64_t now) override {
    return count("renew_semaphores"), m_->renew_semaphores(c, r, now);
  }
  bool set_payload(const std::string& c, const PayloadWrite& w) override {
    return count("set_payload"), m_->set_payload(c, w);
  }
  bool hand_over(const std::string& c, const HandOver& h) override {
    return count("hand_over"), m_->hand_over(c, h);
  }
  void ensure_status_indexes(const std::string& c, std::int64_t t) override {
    m_->ensure_status_indexes(c, t);
  }
  void put_status(const std::string& c, const Document& d) override { m_->put_status(c, d); }
  std::vector<Document> list_status(const std::string& c, const std::string& k) override {
    return m_->list_status(c, k);
  }

 private:
  int count(const char* op) {
    ++calls[op];
    return 0;
  }
  std::shared_ptr<MemoryStorage> m_;
};

class BatchedSemaphoreTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    storage->set_clock_sample_board(std::make_shared<ClockSampleBoard>());
    counting = std::make_shared<CountingStorage>(storage);
    renewer = std::make_unique<Renewer>(clock, 0);  // steps run by run_due()
  }
  void TearDown() override {
    leases.clear();
    renewer.reset();
  }
  KeepAliveLease& hold_slot(const std::string& key, std::int64_t limit, const std::string& name,
                            double ttl_s = 15) {
    SemaphoreOptions o;
    o.key = key;
    o.limit = limit;
    o.ttl_s = ttl_s;
    return keep(std::make_shared<Semaphore>(counting, o, clock,
                                            Identity{"uuid-" + name, "host-" + name, 100}),
                name);
  }
  KeepAliveLease& hold_lock(const std::string& key, double ttl_s = 15) {
    LockerOptions o;
    o.key = key;
    o.ttl_s = ttl_s;
    return keep(
        std::make_shared<Locker>(counting, o, clock, Identity{"uuid-" + key, "host-" + key, 100}),
        key);
  }
  // Keeps `holder`'s hold alive (acquired now, not blocking); its loss is noted as `name`.
  template <class Holder>
  KeepAliveLease& keep(std::shared_ptr<Holder> holder, const std::string& name) {
    KeepAliveOptions ko;
    ko.blocking = false;
    ko.on_lost = [this, name] { lost.push_back(name); };
    leases.push_back(KeepAliveLease::acquire(std::move(holder), ko, renewer.get()));
    return *leases.back();
  }
  void step(std::int64_t limit = INT64_MAX) {
    mongoelector::testing::step_renewer(*clock, *renewer, limit);
  }
  void run_for(std::int64_t ms) { mongoelector::testing::run_renewer_for(*clock, *renewer, ms); }
  // Storage commands over 12 renew intervals (5 s each, ttl 15 s) of 1,000 leases
  // acquired over 4 s, after a first round that aligns them.
  std::int64_t commands_for_1000(bool semaphores) {
    for (int i = 0; i < 1000; ++i) {
      if (semaphores)
        hold_slot("s" + std::to_string(i / 2), 2, "n" + std::to_string(i));  // 2 slots a key
      else
        hold_lock("k" + std::to_string(i));
      clock->advance(4);
    }
    run_for(15000);
    const std::int64_t before = counting->total();
    const auto calls_before = counting->calls;
    run_for(60000);
    window.clear();
    for (const auto& [op, n] : counting->calls) {
      const auto it = calls_before.find(op);
      window[op] = n - (it == calls_before.end() ? 0 : it->second);
    }
    return counting->total() - before;
  }
  std::map<std::string, std::int64_t> window;  // calls of the last measured window, by name

  std::shared_ptr<CountingStorage> counting;
  std::unique_ptr<Renewer> renewer;
  std::vector<std::unique_ptr<KeepAliveLease>> leases;
  std::vector<std::string> lost;
};

TEST_F(BatchedSemaphoreTest, AThousandSlotsCostAsFewCommandsAsAThousandLocks) {
  const std::int64_t locks = commands_for_1000(false);
  EXPECT_TRUE(lost.empty());
  leases.clear();
  counting->calls.clear();
  const std::int64_t slots = commands_for_1000(true);
  std::printf(
      "commands per 12 renew intervals: 1000 lock leases %lld, 1000 semaphore leases %lld\n",
      static_cast<long long>(locks), static_cast<long long>(slots));
  EXPECT_TRUE(lost.empty());
  EXPECT_GE(slots, 11) << "still renewing";
  EXPECT_LE(slots, 2 * 12) << "about one batch per interval, not 1000 renewals";
  EXPECT_LE(2 * slots, 3 * locks) << "within 1.5x the commands of as many lock leases";
  EXPECT_EQ(window["renew_semaphore"], 0) << "no slot renewed on its own";
  // Every command of the window is a batch, or the shared clock sample (once a minute).
  EXPECT_EQ(window["renew_semaphores"] + window["server_time_ms"], slots);
  EXPECT_LE(window["server_time_ms"], 2);
  EXPECT_GE(renewer->batched_renewals(), 2u * 12u * 1000u);
  for (auto& l : leases) {
    ASSERT_FALSE(l->lost()) << l->lost_reason();
    EXPECT_GT(l->renew_deadline_mono(), clock->mono_ms());
  }
}

TEST_F(BatchedSemaphoreTest, ASlotTakenInABatchIsLostTheOthersRenewed) {
  // Six slots of one key and three of another, plus two locks of the same client.
  for (int i = 0; i < 6; ++i) hold_slot("a", 6, "a" + std::to_string(i), 6);
  for (int i = 0; i < 3; ++i) hold_slot("b", 3, "b" + std::to_string(i), 6);
  hold_lock("l1", 6);
  hold_lock("l2", 6);
  std::map<std::string, std::int64_t> deadline;
  for (auto& l : leases)
    deadline[l->semaphore() ? l->semaphore()->identity().uuid : l->locker()->key()] =
        l->renew_deadline_mono();

  // Behind the leases' backs: a2's slot is emptied and taken by a thief; b1's released.
  KeepAliveLease* a2 = leases[2].get();
  KeepAliveLease* b1 = leases[7].get();
  SemaphoreDoc d = *storage->read_semaphore("mongosemaphore", "a");
  const std::int64_t a2_slot = a2->semaphore()->hold()->slot;
  d.slots[static_cast<std::size_t>(a2_slot)] = semaphore_doc::empty_slot();
  storage->put_semaphore("mongosemaphore", d);
  SemaphoreOptions o;
  o.key = "a";
  o.limit = 6;
  o.ttl_s = 6;
  Semaphore thief(counting, o, clock, Identity{"uuid-thief", "host-thief", 1});
  ASSERT_TRUE(thief.try_acquire().has_value());
  ASSERT_EQ(thief.hold()->slot, a2_slot);
  ASSERT_TRUE(storage->release_semaphore("mongosemaphore", "b", b1->semaphore()->hold()->slot,
                                         "uuid-b1", b1->fence()));

  counting->calls.clear();
  step();  // one batch: one renew_semaphores for all nine slots, one renew_many for the locks
  EXPECT_EQ(counting->calls["renew_semaphores"], 1);
  EXPECT_EQ(counting->calls["renew_many"], 1);
  EXPECT_EQ(counting->calls["renew_semaphore"], 0);
  EXPECT_EQ(counting->calls["renew"], 0);
  clock->advance(0);  // the timer thread announces the losses
  std::sort(lost.begin(), lost.end());
  EXPECT_EQ(lost, (std::vector<std::string>{"a2", "b1"}));
  for (auto& l : leases) {
    const std::string name = l->semaphore() ? l->semaphore()->identity().uuid : l->locker()->key();
    if (l.get() == a2 || l.get() == b1) {
      EXPECT_TRUE(l->lost()) << name;
      EXPECT_EQ(l->renew_deadline_mono(), deadline[name]) << name << ": never extended";
    } else {
      EXPECT_FALSE(l->lost()) << name;
      EXPECT_GT(l->renew_deadline_mono(), deadline[name]) << name << ": deadline moved";
    }
  }
  // The thief keeps its slot: the loser's clean-up is fenced.
  run_for(20000);
  d = *storage->read_semaphore("mongosemaphore", "a");
  EXPECT_EQ(d.slots[static_cast<std::size_t>(a2_slot)].uuid, "uuid-thief");
  EXPECT_EQ(lost.size(), 2u);
}

TEST_F(BatchedSemaphoreTest, PerKeyModeRenewsSlotBySlot) {
  renewer->set_batching(false);  // as MONGOELECTOR_BATCH_RENEWALS=0
  for (int i = 0; i < 4; ++i) hold_slot("a", 4, "a" + std::to_string(i));
  counting->calls.clear();
  run_for(15000);
  EXPECT_EQ(counting->calls["renew_semaphores"], 0);
  EXPECT_GE(counting->calls["renew_semaphore"], 4 * 2);
  EXPECT_TRUE(lost.empty());
}

}  // namespace

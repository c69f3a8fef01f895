#include <gtest/gtest.h>

#include "exceptions.h"
#include "identity.h"
#include "storage/mongo_storage.h"
#include "storage/storage.h"
#include "value.h"

using namespace mongoelector;

TEST(Document, SetGetKeepsOrderAndTypes) {
  Document d{{"_id", std::string("k")}, {"pid", std::int64_t{7}}};
  d.set("fence", 3.0);  // stored by another writer as a double
  d.set("pid", std::int64_t{8});
  EXPECT_EQ(d.fields().size(), 3u);
  EXPECT_EQ(d.fields()[1].first, "pid");
  EXPECT_EQ(d.get_int("pid"), 8);
  EXPECT_EQ(d.get_int("fence"), 3);
  EXPECT_FALSE(d.get_string("pid"));
  d.erase("pid");
  EXPECT_FALSE(d.has("pid"));
}

TEST(LockDoc, OddTypesTakeDefaults) {
  Document raw{{"_id", std::string("k")},
               {"locked", std::string("yes")},
               {"ts_expire", std::string("tomorrow")},
               {"pid", std::string("12")}};
  LockDoc d = LockDoc::from_document(raw);
  EXPECT_FALSE(d.locked);
  EXPECT_FALSE(d.ts_expire);
  EXPECT_EQ(d.pid, 0);
  EXPECT_FALSE(d.held_at(0));  // unusable expiry: never blocks forever
}

TEST(Identity, Uuid4Format) {
  std::string a = new_uuid4(), b = new_uuid4();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '4');
  EXPECT_TRUE(a[19] == '8' || a[19] == '9' || a[19] == 'a' || a[19] == 'b');
}

TEST(Identity, KeyValidation) {
  EXPECT_THROW(validate_key(""), InvalidArgument);
  EXPECT_THROW(validate_key(std::string(kMaxKeyBytes + 1, 'x')), InvalidArgument);
  EXPECT_NO_THROW(validate_key(std::string(kMaxKeyBytes, 'x')));
  EXPECT_THROW(validate_key(std::string("a\0b", 3)), InvalidArgument);
  EXPECT_THROW(validate_key("\xff\xfe"), InvalidArgument);
  EXPECT_THROW(validate_key("\xc3"), InvalidArgument);          // truncated
  EXPECT_THROW(validate_key("\xc0\xaf"), InvalidArgument);      // overlong
  EXPECT_THROW(validate_key("\xed\xa0\x80"), InvalidArgument);  // surrogate
  EXPECT_NO_THROW(validate_key("caf\xc3\xa9-\xf0\x9f\x94\x92"));
  EXPECT_THROW(validate_collection("a$b"), InvalidArgument);
}

TEST(Timeouts, ARenewalAtHalfTtlEndsBeforeTheRenewDeadline) {
  // A call is bounded by three op timeouts (selection, connect, socket); the leader
  // renews at ttl/2 and its deadline is at ttl - max(ttl/10, ...).
  for (double ttl : {1.0, 2.0, 3.0, 15.0, 60.0, 600.0}) {
    std::int64_t ttl_ms = static_cast<std::int64_t>(ttl * 1000);
    std::int64_t bound = 3 * op_timeout_ms_for_ttl(ttl);
    EXPECT_LE(ttl_ms / 2 + bound, ttl_ms - ttl_ms / 10) << "ttl " << ttl;
  }
  EXPECT_EQ(op_timeout_ms_for_ttl(0.2), 100);
  EXPECT_EQ(op_timeout_ms_for_ttl(600), 5000);
}

TEST(Timeouts, SetupCallsGetSecondsNotTheTtlsCallBudget) {
  // Index creation and the server probe come before any claim: at ttl=1 a call gets
  // 100 ms, a setup call 5 s.
  EXPECT_EQ(setup_timeout_ms(op_timeout_ms_for_ttl(1.0)), 5000);
  EXPECT_EQ(setup_timeout_ms(8000), 8000);  // never below the call budget
  // A client's own shorter server-selection timeout is kept, a longer one is not.
  EXPECT_EQ(setup_timeout_ms(100, 2000), 2000);
  EXPECT_EQ(setup_timeout_ms(500, 200), 500);
  EXPECT_EQ(setup_timeout_ms(100, 30000), 5000);
  EXPECT_EQ(setup_timeout_ms(100, 0), 5000);  // none given
}

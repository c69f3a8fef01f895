// BSON <-> Document conversion of the libmongoc backend (no server needed).
#include <gtest/gtest.h>

#include <limits>

#include "exceptions.h"
#include "storage/mongo_bson.h"
#include "storage_env.h"

namespace mongoelector::storage_test {
namespace {

using mongo_bson::Bson;

TEST(BsonConversion, EveryValueTypeRoundTrips) {
  SKIP_ON_SQLITE("BSON conversion of the libmongoc backend");
  Document doc{{"_id", std::string("k")},
               {"yes", true},
               {"n", std::int64_t{-5}},
               {"big", std::numeric_limits<std::int64_t>::max()},
               {"d", 0.25},
               {"s", std::string("h\xc3\xa9llo")},
               {"when", DateTime{1700000000123}},
               {"nothing", Null{}}};
  Bson b;
  mongo_bson::append_document(b.get(), doc);
  EXPECT_EQ(mongo_bson::to_document(b.get()), doc);  // same fields, same order
}

TEST(BsonConversion, Int32BecomesInt64AndUnsupportedTypesAreSkipped) {
  SKIP_ON_SQLITE("BSON conversion of the libmongoc backend");
  bson_error_t error;
  bson_t* b = bson_new_from_json(
      reinterpret_cast<const uint8_t*>(
          R"({"i": 7, "oid": {"$oid": "0123456789abcdef01234567"}, "sub": {"x": 1},
              "arr": [1], "ts": {"$timestamp": {"t": 1, "i": 2}},
              "dec": {"$numberDecimal": "1.5"}, "bin": {"$binary": {"base64": "AA==", "subType": "00"}},
              "last": "kept"})"),
      -1, &error);
  ASSERT_NE(b, nullptr) << error.message;
  Document doc = mongo_bson::to_document(b);
  bson_destroy(b);
  EXPECT_EQ(doc, (Document{{"i", std::int64_t{7}}, {"last", std::string("kept")}}));
}

TEST(BsonConversion, StringWithEmbeddedNulKeepsItsLength) {
  SKIP_ON_SQLITE("BSON conversion of the libmongoc backend");
  Document doc{{"s", std::string("a\0b", 3)}};
  Bson b;
  mongo_bson::append_document(b.get(), doc);
  EXPECT_EQ(mongo_bson::to_document(b.get()).get_string("s")->size(), 3u);
}

TEST(BsonConversion, InvalidUtf8AndNulInNamesAreRejected) {
  SKIP_ON_SQLITE("BSON conversion of the libmongoc backend");
  Bson b;
  EXPECT_THROW(mongo_bson::append_value(b.get(), "s", std::string("\xff")), InvalidArgument);
  EXPECT_THROW(mongo_bson::append_value(b.get(), std::string("a\0b", 3), true), InvalidArgument);
  EXPECT_THROW(mongo_bson::append_value(b.get(), "\xc3", true), InvalidArgument);
}

}  // namespace
}  // namespace mongoelector::storage_test

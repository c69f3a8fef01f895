"""The Python package reads URIs with the core's parser (core/storage/uri.h, whose table
of cases is tests/unit/uri_test.cpp): two cases show it is that parser, not the table."""

import pytest
from mongoelector import MongoLocker, _native, _transport


def test_transport_uses_the_core_parser():
    uri = "mongodb://us%40er:p%2Fw@[::1]:1/my%2Ddb?appname=a%20b"
    assert _transport.database_from_uri(uri) == "my-db"
    assert _native.parse_uri(uri)["options"] == [("appname", "a b")]
    assert _transport.database_from_uri("mongodb://h:1/") is None


def test_malformed_uri_is_refused_with_the_core_message():
    with pytest.raises(ValueError, match="bad percent-escape in the database name"):
        MongoLocker("k", "mongodb://127.0.0.1:1/a%zz")

"""Fixtures of the integrations suite (Celery, APScheduler, Django, ASGI lifespan).

``store``: the locks' database for the processes of one test: a fresh SQLite file, or,
when MONGOELECTOR_TEST_URI is set (tests/servers/testserver.sh), a fresh database on
that server.
"""

import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def uri_with_db(uri: str, dbname: str) -> str:
    scheme, rest = uri.split("://", 1)
    hosts, _, opts = rest.partition("?")
    hosts = hosts.split("/", 1)[0]
    return f"{scheme}://{hosts}/{dbname}" + (f"?{opts}" if opts else "")


@pytest.fixture
def store(tmp_path):
    server = os.environ.get("MONGOELECTOR_TEST_URI")
    if server:
        return uri_with_db(server, "me_integ_" + uuid.uuid4().hex[:10])
    return f"sqlite:///{tmp_path}/locks.db"

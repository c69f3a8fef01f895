"""Fixtures of the Python suite.

Backends (the `backend` fixture is parametrised over them):
  mongomock  always: the API contract as users test it.
  pymongo    a pymongo Database on the real server (MONGOELECTOR_TEST_URI).
  uri        the native libmongoc transport ("mongodb://host/dbname") on that server.
The real-server variants skip with a message when MONGOELECTOR_TEST_URI is unset; start
one with tests/servers/testserver.sh (see the README).
"""

import os
import sys
import uuid

import mongomock
import pymongo
import pytest

TEST_URI = os.environ.get("MONGOELECTOR_TEST_URI")
TEST_SERVER = os.environ.get("MONGOELECTOR_TEST_SERVER", "")
NO_SERVER = "MONGOELECTOR_TEST_URI is not set: start a server with tests/servers/testserver.sh"

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "helpers"))


def uri_with_db(uri, dbname):
    """mongodb://host:port/?opts + dbname -> mongodb://host:port/dbname?opts"""
    scheme, rest = uri.split("://", 1)
    hosts, _, opts = rest.partition("?")
    hosts = hosts.split("/", 1)[0]
    return f"{scheme}://{hosts}/{dbname}" + (f"?{opts}" if opts else "")


class Backend:
    """`db` is what the test passes to the API; `raw` a Database to inspect documents."""

    def __init__(self, kind, db, raw, uri=None):
        self.kind = kind
        self.db = db
        self.raw = raw
        self.uri = uri  # the server's URI with the database, for other processes

    @property
    def real(self):
        return self.kind != "mongomock"


@pytest.fixture(scope="session")
def server_uri():
    if not TEST_URI:
        pytest.skip(NO_SERVER)
    return TEST_URI


@pytest.fixture(scope="session")
def server_client(server_uri):
    client = pymongo.MongoClient(server_uri, serverSelectionTimeoutMS=5000)
    yield client
    client.close()


FERRETDB_SKIP = (
    "FerretDB runs findAndModify non-atomically, so mongoelector refuses it "
    "by default (UnsafeServerError); test_ferretdb.py covers it"
)


@pytest.fixture
def server_db(server_client, server_uri, request):
    """A fresh database on the real server: (Database, URI naming it)."""
    if TEST_SERVER == "ferretdb" and not request.node.get_closest_marker("ferretdb"):
        pytest.skip(FERRETDB_SKIP)
    name = "me_test_" + uuid.uuid4().hex[:12]
    yield server_client[name], uri_with_db(server_uri, name)
    try:
        server_client.drop_database(name)
    except pymongo.errors.OperationFailure:
        # mongo-java-server cannot drop a collection whose index was replaced with
        # other options; the server is thrown away after the run anyway.
        pass


def make_backend(kind, request):
    if kind == "mongomock":
        return Backend(kind, mongomock.MongoClient().testdb, None)
    db, uri = request.getfixturevalue("server_db")
    if kind == "pymongo":
        return Backend(kind, db, db, uri)
    return Backend(kind, uri, db, uri)


@pytest.fixture(params=["mongomock", "pymongo", "uri"])
def backend(request):
    b = make_backend(request.param, request)
    if b.raw is None:
        b.raw = b.db
    return b


@pytest.fixture(params=["mongomock", "pymongo", "uri", "sqlite"])
def any_db(request, tmp_path):
    """What the classes take as `db`, on every transport: mongomock, a pymongo Database
    and the native URI transport on the real server, the embedded SQLite backend (a file
    of this test's own)."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/test.db"
    return make_backend(request.param, request).db


@pytest.fixture(params=["mongomock", "pymongo"])
def db_backend(request):
    """Only the Database transports (tests that need the db object itself)."""
    b = make_backend(request.param, request)
    if b.raw is None:
        b.raw = b.db
    return b


@pytest.fixture
def real_backend(request):
    """A pymongo Database on the real server (skips without one)."""
    return make_backend("pymongo", request)


ORIGINAL_VERSION = "1.0.2"


@pytest.fixture(scope="session")
def original_python():
    """Python of a virtualenv with the ORIGINAL mongoelector 1.0.2 from PyPI, cached
    under ${MONGOELECTOR_CACHE:-~/.cache/mongoelector}/orig-venv."""
    import subprocess
    import venv

    cache = os.environ.get("MONGOELECTOR_CACHE") or os.path.expanduser("~/.cache/mongoelector")
    home = os.path.join(cache, "orig-venv")
    python = os.path.join(home, "bin", "python")
    check = [
        python,
        "-c",
        f"import mongoelector, sys; sys.exit(mongoelector.__version__ != {ORIGINAL_VERSION!r})",
    ]
    # Its own mongoelector, never the one PYTHONPATH may point this run at.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if not (
        os.path.exists(python)
        and subprocess.run(check, capture_output=True, env=env).returncode == 0
    ):
        venv.EnvBuilder(with_pip=True, clear=True).create(home)
        r = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"mongoelector=={ORIGINAL_VERSION}",
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            pytest.fail(f"cannot install mongoelector=={ORIGINAL_VERSION} from PyPI:\n{r.stderr}")
        if subprocess.run(check, capture_output=True, env=env).returncode != 0:
            pytest.fail(f"{home} does not provide mongoelector {ORIGINAL_VERSION}")
    return python

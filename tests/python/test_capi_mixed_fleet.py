"""A C API elector (libmongoelector, through ctypes) in a rolling upgrade next to the
ORIGINAL mongoelector 1.0.2: with the 1.1 config's delete_on_release (its default) a
stopping leader deletes its lock document, so the original node takes over at its next
poll instead of waiting for MongoDB's TTL monitor; the 1.0 options struct keeps the 1.0
behaviour (document kept, marked released), which keeps the original out.

Needs the C library: MONGOELECTOR_LIB_DIR names the directory of libmongoelector.so.1
(tests/run_all.sh sets it to the build tree). Skipped without it, except under CI."""

import ctypes
import os
import signal
import time
import uuid

import pytest
from procs import read_log, spawn, wait_log

pytestmark = pytest.mark.slow

ORIGINAL_TTL = 2  # the original follower polls every ttl: it notices within ~2 s
OUR_TTL = 30  # our leader's lease: a takeover at its expiry would take 30 s


class ElectorConfig(ctypes.Structure):
    """mongoelector_elector_config, version 1 (capi/include/mongoelector.h)."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("ttl_seconds", ctypes.c_double),
        ("report_status", ctypes.c_int),
        ("app_version", ctypes.c_char_p),
        ("on_leader", ctypes.c_void_p),
        ("on_leader_loss", ctypes.c_void_p),
        ("on_loop", ctypes.c_void_p),
        ("user_data", ctypes.c_void_p),
        ("delete_on_release", ctypes.c_int),
        ("op_timeout_seconds", ctypes.c_double),
    ]


class ElectorOptions(ctypes.Structure):
    """mongoelector_elector_options (1.0, frozen)."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("ttl_seconds", ctypes.c_double),
        ("report_status", ctypes.c_int),
        ("app_version", ctypes.c_char_p),
        ("on_leader", ctypes.c_void_p),
        ("on_leader_loss", ctypes.c_void_p),
        ("on_loop", ctypes.c_void_p),
        ("user_data", ctypes.c_void_p),
        ("allow_unsafe_server", ctypes.c_int),
    ]


@pytest.fixture(scope="module")
def capi():
    libdir = os.environ.get("MONGOELECTOR_LIB_DIR")
    if not libdir:
        if os.environ.get("CI"):
            pytest.fail("MONGOELECTOR_LIB_DIR is not set (tests/run_all.sh sets it)")
        pytest.skip("MONGOELECTOR_LIB_DIR is not set: no C library to test")
    lib = ctypes.CDLL(os.path.join(libdir, "libmongoelector.so.1"))
    lib.mongoelector_last_error.restype = ctypes.c_char_p
    lib.mongoelector_elector_config_init.argtypes = [ctypes.POINTER(ElectorConfig), ctypes.c_uint32]
    for name in ("client_free", "elector_free"):
        getattr(lib, "mongoelector_" + name).restype = None
    return lib


def check(lib, status):
    assert status == 0, lib.mongoelector_last_error().decode()


class CElector:
    """A C API elector made with the 1.1 config (new=True) or the 1.0 options."""

    def __init__(self, lib, uri, key, new):
        self.lib = lib
        self.client = ctypes.c_void_p()
        self.elector = ctypes.c_void_p()
        check(lib, lib.mongoelector_client_new(uri.encode(), b"", ctypes.byref(self.client)))
        if new:
            cfg = ElectorConfig()
            check(lib, lib.mongoelector_elector_config_init(ctypes.byref(cfg), 1))
            assert cfg.delete_on_release == 1  # the shared default
            cfg.ttl_seconds = OUR_TTL
            check(
                lib,
                lib.mongoelector_elector_new_with(
                    self.client, key.encode(), ctypes.byref(cfg), ctypes.byref(self.elector)
                ),
            )
        else:
            opts = ElectorOptions()
            lib.mongoelector_elector_options_init(ctypes.byref(opts))
            opts.ttl_seconds = OUR_TTL
            check(
                lib,
                lib.mongoelector_elector_new(
                    self.client, key.encode(), ctypes.byref(opts), ctypes.byref(self.elector)
                ),
            )

    def lead(self):
        out = ctypes.c_int(0)
        check(self.lib, self.lib.mongoelector_elector_poll(self.elector))
        check(self.lib, self.lib.mongoelector_elector_is_leader(self.elector, ctypes.byref(out)))
        assert out.value == 1

    def free(self):
        self.lib.mongoelector_elector_free(self.elector)  # stops: releases leadership
        self.lib.mongoelector_client_free(self.client)


def takeover_after_stop(capi, server_db, original_python, tmp_path, new):
    """Seconds from our leader's stop until the original node leads, or None if it did
    not within 3 of its polls."""
    _, uri = server_db
    key, log = "cm-" + uuid.uuid4().hex[:8], tmp_path / "elect.log"
    ours = CElector(capi, uri, key, new)
    ours.lead()
    orig = spawn(
        "elect",
        "--uri",
        uri,
        "--key",
        key,
        "--ttl",
        ORIGINAL_TTL,
        "--log",
        log,
        "--name",
        "orig",
        python=original_python,
    )
    try:
        wait_log(log, lambda rows: any(r[1] == "started" for r in rows))
        time.sleep(ORIGINAL_TTL * 1.5)  # it polled at least once while we led
        assert not [r for r in read_log(log) if r[1] == "leader"], "two leaders"
        stopped = time.monotonic()
        ours.free()
        end = stopped + 3 * ORIGINAL_TTL + 1
        while time.monotonic() < end:
            leads = [float(r[2]) for r in read_log(log) if r[1] == "leader"]
            if leads:
                return leads[0] - stopped
            time.sleep(0.05)
        return None
    finally:
        orig.send_signal(signal.SIGTERM)
        try:
            orig.wait(10)
        except Exception:
            orig.kill()


def test_c_elector_deleting_on_release_lets_the_original_take_over(
    capi, server_db, original_python, tmp_path
):
    took = takeover_after_stop(capi, server_db, original_python, tmp_path, new=True)
    print(
        f"original 1.0.2 led {took:.2f} s after the C elector stopped (its ttl: {OUR_TTL} s)"
        if took is not None
        else "original never led"
    )
    assert took is not None and took < ORIGINAL_TTL + 1.5


def test_c_elector_of_the_1_0_options_keeps_its_1_0_behaviour(
    capi, server_db, original_python, tmp_path
):
    # The 1.0 struct has no delete_on_release: the document stays (marked released), and
    # the original, which inserts, cannot take it until the TTL monitor removes it.
    took = takeover_after_stop(capi, server_db, original_python, tmp_path, new=False)
    assert took is None

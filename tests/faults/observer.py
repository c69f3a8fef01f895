"""Watches the lock document directly (not through any proxy) every ~20 ms and logs what
the server holds: {t (mono, midpoint), srv (server localTime ms), uuid, fence, locked, exp
(ts_expire ms, server time)}. The checker maps server times to CLOCK_MONOTONIC with the
offset srv - t of the same sample (the server's clock may be stepped during a run)."""

import datetime
import threading
import time

import pymongo
from events import EventLog


def _ms(dt):
    return int(dt.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


class Observer(threading.Thread):
    def __init__(self, uri, key, path, period=0.02):
        super().__init__(name="observer", daemon=True)
        self.uri, self.key, self.period = uri, key, period
        self.log = EventLog(path)
        self.halt = threading.Event()
        self.last = None

    def _client(self):
        return pymongo.MongoClient(
            self.uri,
            socketTimeoutMS=300,
            connectTimeoutMS=300,
            serverSelectionTimeoutMS=300,
            retryReads=False,
            retryWrites=False,
            directConnection=True,
        )

    def run(self):
        client = self._client()
        while not self.halt.is_set():
            try:
                t0 = time.monotonic()
                hello = client.admin.command("isMaster")
                t1 = time.monotonic()
                doc = client["faults"]["elector.locks"].find_one({"_id": self.key})
                srv = _ms(hello["localTime"]) if hello.get("localTime") else None
                rec = {"t": round((t0 + t1) / 2, 6), "rtt": round(t1 - t0, 6), "srv": srv}
                if doc:
                    exp = doc.get("ts_expire")
                    rec.update(
                        uuid=doc.get("uuid"),
                        fence=doc.get("fence"),
                        locked=bool(doc.get("locked")),
                        exp=_ms(exp) if exp else None,
                    )
                self.last = rec
                self.log.emit("obs", **rec)
            except Exception as e:  # noqa: BLE001 - frozen/restarting server
                self.log.emit("obs_error", err=type(e).__name__)
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
                client = self._client()
            self.halt.wait(self.period)
        client.close()

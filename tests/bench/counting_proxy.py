"""Loopback TCP proxies that count the MongoDB commands passing through them.

Every contender (whatever its language or driver) is given a proxy's port instead of
the server's, so commands are counted the same way for all of them: the proxy parses
the wire protocol of client -> server bytes (OP_MSG: the first key of the body section;
OP_QUERY: the first key of the query document, legacy handshakes) and counts each
command by name before forwarding it. A command is therefore counted before its reply
can reach the client: a snapshot taken after an operation returned includes all of it.

Monitoring is told apart per connection: the first message of a connection is its
handshake; a connection that has sent nothing but hello/isMaster is a monitor (pymongo's
and libmongoc's heartbeat and RTT connections never send anything else). Hellos on a
connection that also carries other commands (the core's server-time samples) are
counted as the application's. Until a connection sends its first other command, its
hellos are provisionally counted as monitoring and moved over when it does.

One asyncio loop on a daemon thread runs all proxies; snapshot() is thread-safe.
"""

import asyncio
import struct
import threading

HELLO = frozenset(("hello", "isMaster", "ismaster"))
OP_QUERY, OP_MSG, OP_COMPRESSED = 2004, 2013, 2012


def _cstring(buf, pos):
    end = buf.index(b"\x00", pos)
    return buf[pos:end].decode("utf-8", "replace"), end + 1


def _first_key(buf, doc_pos):
    """Name of the first element of the BSON document at doc_pos."""
    if doc_pos + 5 > len(buf) or buf[doc_pos + 4] == 0:
        return "?"
    name, _ = _cstring(buf, doc_pos + 5)
    return name


def command_name(msg):
    """The command name of one complete client->server message (bytes)."""
    opcode = struct.unpack_from("<i", msg, 12)[0]
    try:
        if opcode == OP_MSG:
            pos = 20  # header + flagBits
            while pos < len(msg):
                kind = msg[pos]
                if kind == 0:
                    return _first_key(msg, pos + 1)
                size = struct.unpack_from("<i", msg, pos + 1)[0]  # kind 1: document sequence
                pos += 1 + size
            return "?"
        if opcode == OP_QUERY:
            _, pos = _cstring(msg, 20)  # flags, fullCollectionName
            return _first_key(msg, pos + 8)  # numberToSkip, numberToReturn
        if opcode == OP_COMPRESSED:
            return "(compressed)"
    except (ValueError, IndexError, struct.error):
        pass
    return f"(opcode {opcode})"


class Counts:
    """Counters of one proxy (one contender): app[name], monitor[name]."""

    def __init__(self):
        self.app = {}
        self.monitor = {}
        self.conns_open = 0
        self.conns_total = 0

    def add(self, table, name, n=1):
        table[name] = table.get(name, 0) + n


class _Conn:
    def __init__(self, proxy):
        self.proxy = proxy
        self.buf = bytearray()
        self.messages = 0
        self.is_app = False
        self.pending = {}  # hellos counted as monitoring until the connection proves app

    def feed(self, data):
        """Count every complete message in data (plus what was buffered)."""
        self.buf += data
        c = self.proxy.counts
        while len(self.buf) >= 4:
            length = struct.unpack_from("<i", self.buf, 0)[0]
            if length < 16 or len(self.buf) < length:
                if length < 16:  # not the wire protocol: stop parsing this connection
                    self.buf.clear()
                break
            name = command_name(bytes(self.buf[:length]))
            del self.buf[:length]
            self.messages += 1
            with self.proxy.lock:
                if name in HELLO:
                    if self.messages == 1:
                        c.add(c.monitor, "handshake " + name)
                    elif self.is_app:
                        c.add(c.app, name)
                    else:
                        c.add(c.monitor, name)
                        self.pending[name] = self.pending.get(name, 0) + 1
                else:
                    if not self.is_app:
                        self.is_app = True
                        for k, v in self.pending.items():
                            c.add(c.monitor, k, -v)
                            c.add(c.app, k, v)
                        self.pending.clear()
                    c.add(c.app, name)


class CountingProxy:
    def __init__(self, hub, target_host, target_port, name):
        self.hub, self.name = hub, name
        self.target_host, self.target_port = target_host, target_port
        self.counts = Counts()
        self.lock = threading.Lock()
        self.server = None
        self.port = None
        self.writers = set()

    async def _start(self):
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=1 << 20)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, cr, cw):
        try:
            sr, sw = await asyncio.open_connection(
                self.target_host, self.target_port, limit=1 << 20
            )
        except OSError:
            cw.close()
            return
        conn = _Conn(self)
        with self.lock:
            self.counts.conns_open += 1
            self.counts.conns_total += 1
        self.writers.update((cw, sw))

        async def up():
            try:
                while True:
                    data = await cr.read(1 << 16)
                    if not data:
                        break
                    conn.feed(data)  # count first: the reply cannot come back before
                    sw.write(data)
                    await sw.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sw.close()

        async def down():
            try:
                while True:
                    data = await sr.read(1 << 16)
                    if not data:
                        break
                    cw.write(data)
                    await cw.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                cw.close()

        try:
            await asyncio.gather(up(), down())
        finally:
            self.writers.discard(cw)
            self.writers.discard(sw)
            with self.lock:
                self.counts.conns_open -= 1

    def snapshot(self):
        """{"app": {...}, "monitor": {...}, "conns_open", "conns_total"} (a copy)."""
        with self.lock:
            c = self.counts
            return {
                "app": dict(c.app),
                "monitor": dict(c.monitor),
                "conns_open": c.conns_open,
                "conns_total": c.conns_total,
            }

    def uri(self, path=""):
        return f"mongodb://127.0.0.1:{self.port}/{path}"

    def close(self):
        async def f():
            self.server.close()
            for w in list(self.writers):
                w.close()

        asyncio.run_coroutine_threadsafe(f(), self.hub.loop).result(5)


class ProxyHub:
    """Owns the event loop thread; new_proxy() gives a proxy with its own counters."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxies", daemon=True)
        self.thread.start()

    def new_proxy(self, target_host, target_port, name):
        p = CountingProxy(self, target_host, target_port, name)
        asyncio.run_coroutine_threadsafe(p._start(), self.loop).result(5)
        return p


def diff(after, before):
    """Commands counted between two snapshots: {"app": {...}, "monitor": {...}}."""
    out = {}
    for table in ("app", "monitor"):
        d = {}
        for k, v in after[table].items():
            n = v - before[table].get(k, 0)
            if n:
                d[k] = n
        out[table] = d
    return out

"""Loopback TCP proxies the fault suite puts between each node and the server.

One asyncio loop on a background thread runs every proxy; the orchestrator changes a
proxy's mode from its own thread (methods below are thread-safe).

Modes and injections:
  forward                 pass bytes both ways
  blackhole               stop forwarding both ways (bytes read and dropped), keep every
                          socket open, accept new connections and black-hole them too
  reset                   close every connection with RST; new connections are reset at once
  hold                    queue client->server bytes (existing and new connections) without
                          forwarding; `open_new()` then forwards NEW connections while the
                          held ones stay held; `flush_held()` finally delivers the queued
                          bytes (a request that timed out at the client lands late)
  delay_hello(d)          every client->server message carrying a hello/isMaster command
                          (handshakes, heartbeats and the server-time samples) is forwarded
                          d seconds late: the server stamps localTime late, so a sample taken
                          through it puts the server's clock ahead by up to d/2
  drop_after(b"findAndModify")  one shot: forward the next request containing the marker,
                          then close the connection before its reply comes back
"""

import asyncio
import socket
import struct
import threading

_HELLO = tuple(
    bytes([t]) + name + b"\x00"
    for t in (0x01, 0x08, 0x10, 0x12)
    for name in (b"hello", b"isMaster", b"ismaster")
)


class _Conn:
    def __init__(self, proxy, cr, cw, sr, sw):
        self.proxy, self.cr, self.cw, self.sr, self.sw = proxy, cr, cw, sr, sw
        self.held = proxy.mode == "hold"
        self.queue = []
        self.closed = False
        self.cut = False

    def reset(self):
        if self.closed:
            return
        self.closed = True
        for w in (self.cw, self.sw):
            try:
                sock = w.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                w.close()
            except Exception:  # noqa: BLE001
                pass

    async def up(self):  # client -> server
        try:
            while True:
                data = await self.cr.read(65536)
                if not data:
                    break
                p = self.proxy
                if self.held:
                    self.queue.append(data)
                    continue
                if p.mode == "blackhole":
                    continue
                if p.hello_delay > 0 and any(m in data for m in _HELLO):
                    await asyncio.sleep(p.hello_delay)
                if p.drop_marker is not None and p.drop_marker in data:
                    self.cut = True  # set before forwarding: no byte of the reply goes back
                    for other in p.peers:  # one cut per injection, whichever node claims first
                        if other is not p:
                            other.drop_marker = None
                self.sw.write(data)
                await self.sw.drain()
                if p.drop_marker is not None and p.drop_marker in data:
                    p.drop_marker = None
                    self.cut = True  # no byte of the reply goes back
                    p.events.append(("dropped_after", p.loop.time()))
                    # The request reached the server; its reply never reaches the client.
                    await asyncio.sleep(0.05)
                    self.reset()
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            if not self.held:
                self.reset()
            # A held connection keeps its server side open until flush_held().

    async def down(self):  # server -> client
        try:
            while True:
                data = await self.sr.read(65536)
                if not data:
                    break
                p = self.proxy
                if p.mode == "blackhole" or self.held or self.cut:
                    continue
                self.cw.write(data)
                await self.cw.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not self.held:
                self.reset()


class Proxy:
    def __init__(self, loop, target_port, name, target_host="127.0.0.1"):
        self.loop, self.target_port, self.name = loop, target_port, name
        self.target_host = target_host
        self.mode = "forward"
        self.hello_delay = 0.0
        self.drop_marker = None
        self.peers = []
        self.conns = set()
        self.events = []
        self.server = None
        self.port = None

    async def _start(self):
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, cr, cw):
        if self.mode == "reset":
            sock = cw.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            cw.close()
            return
        try:
            sr, sw = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            cw.close()
            return
        c = _Conn(self, cr, cw, sr, sw)
        self.conns.add(c)
        try:
            await asyncio.gather(c.up(), c.down())
        finally:
            if not c.held:
                self.conns.discard(c)

    # ---- thread-safe controls -------------------------------------------------------
    def _call(self, fn):
        fut = asyncio.run_coroutine_threadsafe(_as_coro(fn), self.loop)
        return fut.result(5)

    def set_mode(self, mode):
        def f():
            self.mode = mode
            if mode == "reset":
                for c in list(self.conns):
                    c.reset()
                self.conns.clear()
            if mode == "hold":
                for c in self.conns:
                    c.held = True

        self._call(f)

    def open_new(self):
        """Forward new connections; connections held so far stay held."""
        self._call(lambda: setattr(self, "mode", "forward"))

    def flush_held(self):
        async def f():
            n = 0
            for c in [c for c in self.conns if c.held]:
                for data in c.queue:
                    n += len(data)
                    c.sw.write(data)
                c.queue.clear()
                try:
                    await c.sw.drain()
                except (ConnectionError, OSError):
                    pass
            return n

        fut = asyncio.run_coroutine_threadsafe(f(), self.loop)
        return fut.result(5)

    def drop_held(self):
        def f():
            for c in [c for c in self.conns if c.held]:
                c.held = False
                c.reset()
                self.conns.discard(c)

        self._call(f)

    def set_hello_delay(self, d):
        self._call(lambda: setattr(self, "hello_delay", d))

    def arm_drop_after(self, marker=b"findAndModify"):
        self._call(lambda: setattr(self, "drop_marker", marker))

    def disarm(self):
        self._call(lambda: setattr(self, "drop_marker", None))


async def _as_coro(fn):
    return fn()


class ProxyHub:
    """Owns the asyncio loop thread and the proxies."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxies", daemon=True)
        self.thread.start()
        self.proxies = []

    def new_proxy(self, target_port, name, target_host="127.0.0.1"):
        p = Proxy(self.loop, target_port, name, target_host)
        p.peers = self.proxies
        asyncio.run_coroutine_threadsafe(p._start(), self.loop).result(5)
        self.proxies.append(p)
        return p

    def close(self):
        async def f():
            for p in self.proxies:
                p.server.close()
                for c in list(p.conns):
                    c.reset()

        asyncio.run_coroutine_threadsafe(f(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)

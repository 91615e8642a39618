"""A TCP fault proxy for chaos runs: pass, cut, blackhole or delay what a client and a server say.

A :class:`ProxyHost` runs one asyncio loop in a daemon thread; every :class:`FaultProxy`
it makes listens on ``127.0.0.1:PORT`` and forwards each connection it accepts to one
upstream address. The run switches a proxy's :class:`Mode` at run time, from any thread:

* ``pass``: bytes are forwarded as they come;
* ``cut``: every open connection is reset (RST, as a peer that crashed or a firewall
  that rejects), and every new one is reset right after it is accepted;
* ``blackhole``: connections stay open, new ones are accepted and held, and no byte moves
  in either direction: what the client sends waits in the socket buffers, as packets do
  while TCP retransmits through a partition. When the mode ends, the held bytes flow on
  (a partition that heals before TCP gives up); a client that gave up meanwhile closed
  its connection, and the proxy closes the other side;
* ``latency``: every chunk read is written ``latency_ms`` later, each way (a pipeline, not
  a pause per chunk: throughput stays, the round trip grows by twice the delay).

The modes are a state machine (:data:`TRANSITIONS`): a fault starts from ``pass`` and
ends back in ``pass``, one at a time; ``closed`` is final.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from coordinator.kernel.errors import StateTransitionError

__all__ = ["TRANSITIONS", "FaultProxy", "Mode", "ProxyHost", "ProxyStats"]

HOST = "127.0.0.1"
_CHUNK = 65536
_QUEUED_CHUNKS = 64  # per direction: a slow reader holds back the sender, as TCP does
_T = TypeVar("_T")


class Mode(Enum):
    """What a proxy does with the bytes it is given."""

    PASS = "pass"
    CUT = "cut"
    BLACKHOLE = "blackhole"
    LATENCY = "latency"
    CLOSED = "closed"


TRANSITIONS: dict[Mode, frozenset[Mode]] = {
    Mode.PASS: frozenset({Mode.CUT, Mode.BLACKHOLE, Mode.LATENCY, Mode.CLOSED}),
    Mode.CUT: frozenset({Mode.PASS, Mode.CLOSED}),
    Mode.BLACKHOLE: frozenset({Mode.PASS, Mode.CLOSED}),
    Mode.LATENCY: frozenset({Mode.PASS, Mode.CLOSED}),
    Mode.CLOSED: frozenset(),
}


@dataclass
class ProxyStats:
    """What a proxy did so far.

    Attributes:
        accepted: Connections accepted.
        reset: Connections reset by a cut (open ones and refused new ones).
        upstream_failed: Connections closed because the upstream refused them.
        bytes_up: Bytes forwarded client to server.
        bytes_down: Bytes forwarded server to client.
    """

    accepted: int = 0
    reset: int = 0
    upstream_failed: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (linger 0), not FIN: the peer sees a connection reset at once."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Link:
    """One client connection and, once made, its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None

    def reset(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                _reset(writer)


class FaultProxy:
    """One listening port forwarding to one upstream; its mode changes at run time.

    Made by :meth:`ProxyHost.add`. ``set_mode`` may be called from any thread; it
    returns once the mode is in force (a cut's connections are reset by then).

    Attributes:
        name: A label for logs (``broker-1``, ``zookeeper-producer-0-1``).
        upstream: ``(host, port)`` connections are forwarded to.
        port: The port it listens on (``127.0.0.1``).
        stats: Counters (:class:`ProxyStats`).
    """

    def __init__(self, host: ProxyHost, name: str, upstream: tuple[str, int]) -> None:
        self.name = name
        self.upstream = upstream
        self.port = 0
        self.stats = ProxyStats()
        self._host = host
        self._mode = Mode.PASS
        self._latency_s = 0.0
        self._lock = threading.Lock()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None

    @property
    def mode(self) -> Mode:
        """The mode in force."""
        return self._mode

    @property
    def latency_ms(self) -> float:
        """The added delay each way, in ms (0 unless the mode is ``latency``)."""
        return self._latency_s * 1000.0

    def set_mode(self, mode: Mode, latency_ms: float = 0.0) -> None:
        """Switch to ``mode`` (``latency_ms`` for :attr:`Mode.LATENCY`).

        Raises:
            StateTransitionError: ``mode`` is not reachable from the mode in force (a
                fault must end in ``pass`` before the next one starts).
            ValueError: A latency mode without a positive delay.
        """
        if mode is Mode.LATENCY and latency_ms <= 0:
            raise ValueError(f"{self.name}: latency needs a positive delay, not {latency_ms}")
        with self._lock:  # the one place the mode changes
            if mode is self._mode and mode is Mode.PASS:
                return
            if mode not in TRANSITIONS[self._mode]:
                raise StateTransitionError(
                    f"proxy {self.name}: no move from {self._mode.value} to {mode.value}"
                )
            self._mode = mode
            self._latency_s = latency_ms / 1000.0 if mode is Mode.LATENCY else 0.0
        self._host.call(self._apply(mode))

    async def _apply(self, mode: Mode) -> None:
        if mode is Mode.BLACKHOLE:
            self._flowing.clear()
            return
        self._flowing.set()
        if mode in (Mode.CUT, Mode.CLOSED):
            for link in list(self._links):
                link.reset()
                if mode is Mode.CUT:
                    self.stats.reset += 1
        if mode is Mode.CLOSED and self._server is not None:
            self._server.close()

    async def _start(self, port: int) -> None:
        self._server = await asyncio.start_server(self._handle, HOST, port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._links.add(link)
        self.stats.accepted += 1
        try:
            if self._mode in (Mode.CUT, Mode.CLOSED):
                self.stats.reset += 1
                _reset(writer)
                return
            await self._flowing.wait()  # a blackhole holds new connections too
            if self._mode in (Mode.CUT, Mode.CLOSED):
                return  # the cut reset it
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                self.stats.upstream_failed += 1
                _reset(writer)
                return
            link.upstream = up_writer
            if self._mode in (Mode.CUT, Mode.CLOSED):  # cut while connecting
                link.reset()
                return
            pumps = [
                asyncio.ensure_future(self._pump(reader, up_writer, up=True)),
                asyncio.ensure_future(self._pump(up_reader, writer, up=False)),
            ]
            # Either side ending ends the link: Kafka and ZooKeeper never half-close.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._links.discard(link)
            for w in (writer, link.upstream):
                if w is not None:
                    w.close()

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool
    ) -> None:
        """Read ``src`` into a queue stamped with each chunk's due time; write it to ``dst``."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUED_CHUNKS)

        async def write() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._flowing.wait()
                dst.write(data)
                await dst.drain()
                if up:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)

        writer = asyncio.ensure_future(write())
        try:
            while not writer.done():
                await self._flowing.wait()
                try:
                    data = await src.read(_CHUNK)
                except OSError:
                    data = b""
                await queue.put((time.monotonic() + self._latency_s, data))
                if not data:
                    break
            await writer
        except (OSError, asyncio.CancelledError):
            writer.cancel()
            raise


class ProxyHost:
    """The event loop (one daemon thread) that runs every :class:`FaultProxy` of a run."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netproxy", daemon=True)
        self._thread.start()
        self.proxies: list[FaultProxy] = []

    def call(self, coro: Coroutine[Any, Any, _T], timeout: float = 10.0) -> _T:
        """Run ``coro`` on the proxies' loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add(self, name: str, upstream: tuple[str, int], port: int = 0) -> FaultProxy:
        """Start a proxy to ``upstream`` listening on ``port`` (0: a free one)."""

        async def make() -> FaultProxy:
            # Made inside the loop: its asyncio objects belong to this loop.
            proxy = FaultProxy(self, name, upstream)
            await proxy._start(port)
            return proxy

        proxy = self.call(make())
        self.proxies.append(proxy)
        return proxy

    def close(self) -> None:
        """Close every proxy (resetting its connections) and stop the loop."""
        for proxy in self.proxies:
            with contextlib.suppress(StateTransitionError):
                proxy.set_mode(Mode.PASS)
            with contextlib.suppress(StateTransitionError):
                proxy.set_mode(Mode.CLOSED)

        async def cancel_links() -> None:
            # Every link's task ends here, not as "destroyed but pending" at exit.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.call(cancel_links())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

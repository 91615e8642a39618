"""The chaos run's TCP fault proxy on loopback: pass, cut, blackhole, latency, and its table."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from coordinator.kernel.errors import StateTransitionError
from ordered.chaos.net_faults import NetFaults, NetProxies
from ordered.chaos.netproxy import FaultProxy, Mode, ProxyHost
from ordered.chaos.schedule import FaultKind, ScheduledFault

pytestmark = pytest.mark.timeout(30)


class Echo:
    """A loopback server that echoes every byte back, one thread per connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:
                pass


@pytest.fixture
def host() -> Iterator[ProxyHost]:
    proxies = ProxyHost()
    yield proxies
    proxies.close()


@pytest.fixture
def proxy(host: ProxyHost) -> FaultProxy:
    echo = Echo()
    return host.add("echo", ("127.0.0.1", echo.port))


def connect(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.settimeout(5)
    return sock


def roundtrip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def is_reset(sock: socket.socket) -> bool:
    """Whether the connection is dead: reset, or closed, when asked for an echo."""
    try:
        sock.sendall(b"x")
        return sock.recv(10) == b""
    except ConnectionError:
        return True


def new_connection_is_reset(proxy: FaultProxy) -> bool:
    """Whether a new connection is reset (on loopback the RST may beat ``connect()``)."""
    try:
        sock = connect(proxy)
    except ConnectionError:
        return True
    with sock:
        return is_reset(sock)


def test_pass_forwards_both_ways(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert roundtrip(sock, b"hello") == b"hello"
        big = bytes(range(256)) * 2000
        assert roundtrip(sock, big) == big
    assert proxy.stats.accepted == 1
    assert proxy.stats.bytes_up >= 5 + len(big)


def test_a_cut_resets_open_connections_and_refuses_new_ones_until_restored(
    proxy: FaultProxy,
) -> None:
    sock = connect(proxy)
    assert roundtrip(sock, b"a") == b"a"
    proxy.set_mode(Mode.CUT)
    assert is_reset(sock)
    assert new_connection_is_reset(proxy)
    proxy.set_mode(Mode.PASS)
    with connect(proxy) as fresh:
        assert roundtrip(fresh, b"back") == b"back"
    assert proxy.stats.reset >= 2
    sock.close()


def test_a_blackhole_moves_nothing_then_lets_the_held_bytes_through(proxy: FaultProxy) -> None:
    sock = connect(proxy)
    assert roundtrip(sock, b"a") == b"a"
    proxy.set_mode(Mode.BLACKHOLE)
    sock.sendall(b"held")
    sock.settimeout(1.0)
    with pytest.raises(TimeoutError):
        sock.recv(10)
    # A new connection is accepted and held too.
    late = connect(proxy)
    late.sendall(b"late")
    late.settimeout(0.5)
    with pytest.raises(TimeoutError):
        late.recv(10)
    proxy.set_mode(Mode.PASS)
    sock.settimeout(5)
    late.settimeout(5)
    assert sock.recv(10) == b"held"
    assert late.recv(10) == b"late"
    sock.close()
    late.close()


def test_latency_delays_each_way(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        started = time.monotonic()
        roundtrip(sock, b"a")
        direct = time.monotonic() - started
        proxy.set_mode(Mode.LATENCY, latency_ms=150)
        started = time.monotonic()
        assert roundtrip(sock, b"slow") == b"slow"
        slow = time.monotonic() - started
        proxy.set_mode(Mode.PASS)
        started = time.monotonic()
        roundtrip(sock, b"b")
        after = time.monotonic() - started
    assert slow >= 0.3 > direct
    assert after < 0.3


def test_a_refused_upstream_closes_the_client(host: ProxyHost) -> None:
    dead = socket.create_server(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    proxy = host.add("dead", ("127.0.0.1", port))
    assert new_connection_is_reset(proxy)
    assert proxy.stats.upstream_failed == 1


def test_one_fault_at_a_time_and_closed_is_final(proxy: FaultProxy) -> None:
    proxy.set_mode(Mode.LATENCY, latency_ms=10)
    with pytest.raises(StateTransitionError):
        proxy.set_mode(Mode.CUT)
    proxy.set_mode(Mode.PASS)
    with pytest.raises(ValueError):
        proxy.set_mode(Mode.LATENCY, latency_ms=0)
    proxy.set_mode(Mode.CLOSED)
    with pytest.raises(StateTransitionError):
        proxy.set_mode(Mode.PASS)


def _fault(kind: FaultKind, target: str, down_s: float, **params: float) -> ScheduledFault:
    return ScheduledFault(1.0, kind, target, {"down_s": down_s, **params})


def test_a_later_fault_ends_an_earlier_one_and_its_restore_is_a_no_op() -> None:
    proxies = NetProxies(brokers=1)
    try:
        proxies.set_zookeeper("127.0.0.1:1/chroot")
        assert proxies.zookeeper_for("coordinator-0").endswith("/chroot")
        said: list[str] = []
        faults = NetFaults(proxies, said.append)
        timers: list[Callable[[], None]] = []
        records: list[tuple[FaultKind, str, str]] = []

        def record(kind: FaultKind, target: str, detail: str) -> None:
            records.append((kind, target, detail))

        def later(_delay: float, _what: str, call: Callable[[], None]) -> None:
            timers.append(call)

        [kafka] = proxies.kafka
        faults.inject(_fault(FaultKind.KAFKA_BLACKHOLE, "broker-1", 10), record, later)
        assert kafka.mode is Mode.BLACKHOLE
        faults.inject(_fault(FaultKind.KAFKA_LATENCY, "broker-1", 5, latency_ms=80), record, later)
        assert kafka.mode is Mode.LATENCY and kafka.latency_ms == 80
        timers[0]()  # the blackhole's restore: the latency is not its to end
        assert kafka.mode is Mode.LATENCY
        timers[1]()
        assert kafka.mode is Mode.PASS
        [zk] = proxies.by_slot["coordinator-0"]
        faults.inject(_fault(FaultKind.ZOOKEEPER_CUT, "coordinator-0", 3), record, later)
        assert zk.mode is Mode.CUT
        faults.inject(_fault(FaultKind.ZOOKEEPER_CUT, "producer-2", 3), record, later)
        assert "skipped" in said[-1] and len(records) == 3
        faults.restore_all()
        assert zk.mode is Mode.PASS
        listen, advertised = proxies.client_listeners[0]
        assert advertised == kafka.port and listen != advertised
        assert proxies.bootstrap == f"127.0.0.1:{kafka.port}"
    finally:
        proxies.close()

"""``Router``: the one home of the KIP-253 routing formula.

A router is built from ``(initial, active, algorithm)``. With ``N = initial`` and
``U = active``, ``low = N * 2**L`` (``L`` largest with ``low <= U``) and ``high = 2 * low``
are its moduli; a hash ``h`` goes to ``r = h % high``, folded back by ``low`` when
``r >= U`` (:meth:`Router.partition`, the only Python code that computes it; the
compiled send path has its one C twin, ``route_hash`` in ``ordered/_fastproduce.c``).

``h % high`` agrees with ``h % low`` up to a multiple of ``low``, so one modulo
suffices: ``r`` is kept when it is an active partition, else ``r - low`` is the
partition it was split from. Every other router of the project is this one:
:func:`linear_hash.route` and :func:`linear_hash.partition_for` go through a cached
router, :class:`linear_hash.Layout` is a router (murmur3) with an epoch, the producer
routes with a router's :meth:`~Router.partition`, and the key audit of the consumer with
the compiled router of ``ordered.compiled``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, Protocol

from linear_hash.hashing import (
    DEFAULT_ALGORITHM,
    Key,
    _as_bytes,
    _hasher_for,
    _mmh3_hash,
)

__all__ = ["KeyRouter", "Router"]

_DEFAULT: Final = DEFAULT_ALGORITHM
_OWN: Final = "(the router's own)"
"""The default ``algorithm`` of :meth:`Router.partition`: the router's own (by identity;
any other value, ``None`` included, must name an algorithm)."""


def _check_int(value: object, name: str) -> int:
    """``value`` if it is an ``int`` (not a ``bool``), else :class:`TypeError`."""
    # bool is an int subclass, but a partition count of True is always a bug.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def _check_counts(initial: object, active: object, active_name: str = "active") -> None:
    """Validate ``initial >= 1`` and ``active >= initial`` (ints)."""
    _check_int(initial, "initial")
    _check_int(active, active_name)
    if initial < 1:  # type: ignore[operator]
        raise ValueError(f"initial must be >= 1, got {initial}")
    if active < initial:  # type: ignore[operator]
        raise ValueError(f"{active_name} must be >= initial ({initial}), got {active}")


def _moduli(initial: int, active: int) -> tuple[int, int]:
    """``(N * 2**L, N * 2**(L + 1))`` for validated counts."""
    high = initial << (active // initial).bit_length()
    return high >> 1, high


def _other_hasher(algorithm: str) -> Callable[[object], int] | None:
    """The hasher of an algorithm named per call; ``None`` for murmur3 (inlined)."""
    return None if algorithm == _DEFAULT else _hasher_for(algorithm)


def _identity(h: object) -> int:
    return h  # type: ignore[return-value]


class KeyRouter(Protocol):
    """What routes keys of one layout: :class:`Router`, or its compiled twin.

    ``ordered.compiled.compiled_router`` returns the C implementation (murmur3, bytes and
    ASCII ``str`` keys in C, anything else through the Python router) when it is built.
    """

    @property
    def initial(self) -> int:
        """``N``."""

    @property
    def active(self) -> int:
        """``U``."""

    def partition(self, key: Any) -> int:
        """The partition of ``key``."""


class Router:
    """Routes the keys and hashes of one layout with one key hash.

    Immutable, slotted, picklable; equal routers have equal ``(initial, active,
    algorithm)``. :class:`linear_hash.Layout` is a router with an epoch.

    Args:
        initial: ``N``, the partition count the topic was adopted with (>= 1).
        active: ``U``, the active partition count (>= ``initial``).
        algorithm: One of :data:`linear_hash.ALGORITHMS`.

    Raises:
        TypeError: A count is not an ``int`` (``bool`` is rejected).
        ValueError: ``initial < 1``, ``active < initial`` or an unknown ``algorithm``.
    """

    __slots__ = ("_hasher", "_high", "_low", "active", "algorithm", "initial")

    initial: int
    active: int
    algorithm: str
    _low: int
    _high: int
    _hasher: Callable[[object], int] | None

    def __init__(self, initial: int, active: int, algorithm: str = DEFAULT_ALGORITHM) -> None:
        _check_counts(initial, active)
        self._setup(initial, active, algorithm, _other_hasher(algorithm))

    def _setup(
        self, initial: int, active: int, algorithm: str, hasher: Callable[[object], int] | None
    ) -> None:
        # object.__setattr__: a frozen dataclass (Layout) shares this code.
        low, high = _moduli(initial, active)
        for name, value in (
            ("initial", initial),
            ("active", active),
            ("algorithm", algorithm),
            ("_low", low),
            ("_high", high),
            ("_hasher", hasher),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Router)
        return (self.initial, self.active, self.algorithm) == (
            other.initial,
            other.active,
            other.algorithm,
        )

    def __hash__(self) -> int:
        return hash((self.initial, self.active, self.algorithm))

    def __repr__(self) -> str:
        return f"Router(initial={self.initial}, active={self.active}, algorithm={self.algorithm!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Router, (self.initial, self.active, self.algorithm))

    @property
    def modulus_low(self) -> int:
        """``initial * 2**L``."""
        return self._low

    @property
    def modulus_high(self) -> int:
        """``initial * 2**(L + 1)``."""
        return self._high

    def partition(self, key: Key, algorithm: str = _OWN) -> int:
        """Return the partition of a record key: the KIP-253 formula, once in Python.

        This is the hot path of the producer (and, as :meth:`Layout.partition_for`, of
        every reader): murmur3 is inlined, since a call costs as much as the rest.

        Args:
            key: The record key, ``str`` (hashed as UTF-8) or bytes-like.
            algorithm: Hash with this algorithm instead of the router's own (the
                signature of :meth:`linear_hash.Layout.partition_for`).

        Returns:
            The partition, in ``[0, active)``.

        Raises:
            TypeError: ``key`` is neither ``str`` nor bytes-like.
            ValueError: Unknown ``algorithm``, or a ``str`` key not encodable as UTF-8.
        """
        hasher = self._hasher if algorithm is _OWN else _other_hasher(algorithm)
        if hasher is None:
            # Inlined hashing._murmur3 (see there for why the key is checked).
            t = type(key)
            if t is not bytes and (t is not str or not key.isascii()):  # type: ignore[union-attr]
                key = _as_bytes(key)
            h: int = _mmh3_hash(key, 0, False)  # type: ignore[arg-type]
        else:
            h = hasher(key)
        r = h % self._high
        return r - self._low if r >= self.active else r

    def route(self, h: int) -> int:
        """Map a non-negative hash to its partition; see :func:`linear_hash.route`.

        Raises:
            TypeError: ``h`` is not an ``int``.
            ValueError: ``h < 0``.
        """
        _check_int(h, "h")
        if h < 0:
            raise ValueError(f"h must be >= 0, got {h}")
        return _route(h, self.initial, self.active)


class _HashRouter(Router):
    """A router whose keys are hashes already (the identity as its hash)."""

    __slots__ = ()

    def __init__(self, initial: int, active: int) -> None:
        self._setup(initial, active, "identity", _identity)


@lru_cache(maxsize=1024)
def _hash_router(initial: int, active: int) -> Router:
    return _HashRouter(initial, active)


def _route(h: int, initial: int, active: int) -> int:
    """:func:`linear_hash.route` for arguments already validated."""
    return _hash_router(initial, active).partition(h)  # type: ignore[arg-type]

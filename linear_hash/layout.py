"""``Layout``: one epoch's partition layout of a topic, and its JSON record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from linear_hash.flow import key_flow
from linear_hash.hashing import DEFAULT_ALGORITHM, Key, _as_bytes, _hasher_for, _mmh3_hash
from linear_hash.routing import _check_counts, _check_int, _moduli

__all__ = ["LAYOUT_VERSION", "Layout"]

LAYOUT_VERSION: Final = 1
"""The ``version`` written by :meth:`Layout.to_json` and accepted by ``from_json``."""

_FIELDS: Final = frozenset({"version", "initial", "active", "epoch"})
_DEFAULT: Final = DEFAULT_ALGORITHM


@dataclass(frozen=True, slots=True)
class Layout:
    """The linear-hashing layout of a topic in one epoch.

    Immutable and hashable; equality and hashing use ``initial``, ``active`` and
    ``epoch``. The routing moduli are computed once, so :meth:`partition_for` is the
    fastest way to place many keys under one layout.

    Attributes:
        initial: ``N``, the partition count the topic was adopted with (>= 1).
        active: ``U``, the active partition count (>= ``initial``); partitions
            ``[0, active)`` are active.
        epoch: The layout epoch (>= 0); every change of ``active`` is a new epoch.

    Raises:
        TypeError: A field is not an ``int`` (``bool`` is rejected).
        ValueError: ``initial < 1``, ``active < initial`` or ``epoch < 0``.
    """

    initial: int
    active: int
    epoch: int = 0
    _low: int = field(init=False, repr=False, compare=False)
    _high: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_counts(self.initial, self.active)
        _check_int(self.epoch, "epoch")
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        low, high = _moduli(self.initial, self.active)
        object.__setattr__(self, "_low", low)
        object.__setattr__(self, "_high", high)

    @property
    def level(self) -> int:
        """``L``: the largest integer with ``initial * 2**L <= active``."""
        return (self._low // self.initial).bit_length() - 1

    @property
    def split(self) -> int:
        """``S = active - initial * 2**L``: the next partition to split on growth."""
        return self.active - self._low

    @property
    def modulus_low(self) -> int:
        """``initial * 2**L``."""
        return self._low

    @property
    def modulus_high(self) -> int:
        """``initial * 2**(L + 1)``."""
        return self._high

    def route(self, h: int) -> int:
        """Map a non-negative hash to its partition; see :func:`linear_hash.route`.

        Raises:
            TypeError: ``h`` is not an ``int``.
            ValueError: ``h < 0``.
        """
        _check_int(h, "h")
        if h < 0:
            raise ValueError(f"h must be >= 0, got {h}")
        r = h % self._high
        return r - self._low if r >= self.active else r

    def partition_for(self, key: Key, algorithm: str = DEFAULT_ALGORITHM) -> int:
        """Return the partition of a record key under this layout.

        Args:
            key: The record key, ``str`` (hashed as UTF-8) or bytes-like.
            algorithm: One of :data:`linear_hash.ALGORITHMS`.

        Returns:
            The partition, in ``[0, active)``.

        Raises:
            TypeError: ``key`` is neither ``str`` nor bytes-like.
            ValueError: Unknown ``algorithm``, or a ``str`` key not encodable as UTF-8.
        """
        if algorithm != _DEFAULT:
            h = _hasher_for(algorithm)(key)
        else:
            # Inlined hashing._murmur3 (see there for why the key is checked).
            t = type(key)
            if t is not bytes and (t is not str or not key.isascii()):  # type: ignore[union-attr]
                key = _as_bytes(key)
            h = _mmh3_hash(key, 0, False)  # type: ignore[arg-type]
        r: int = h % self._high
        return r - self._low if r >= self.active else r

    def with_active(self, active: int, epoch: int | None = None) -> Layout:
        """Return the layout after changing the active count.

        Args:
            active: The new active count (>= ``initial``).
            epoch: The new layout's epoch; defaults to ``self.epoch + 1``.
        """
        return Layout(self.initial, active, self.epoch + 1 if epoch is None else epoch)

    def key_flow_to(self, other: Layout) -> list[tuple[int, int]]:
        """:func:`linear_hash.key_flow` from this layout to ``other``.

        Raises:
            ValueError: ``other`` has a different ``initial``.
        """
        if other.initial != self.initial:
            raise ValueError(
                f"other.initial ({other.initial}) differs from initial ({self.initial})"
            )
        return key_flow(self.initial, self.active, other.active)

    def to_json(self) -> str:
        """Serialise as a versioned JSON record with sorted keys.

        Returns:
            For example ``{"active":6,"epoch":2,"initial":4,"version":1}``.
        """
        return json.dumps(
            {
                "version": LAYOUT_VERSION,
                "initial": self.initial,
                "active": self.active,
                "epoch": self.epoch,
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, s: str | bytes) -> Layout:
        """Parse a record written by :meth:`to_json`, checking its schema.

        Args:
            s: The JSON text (``str`` or UTF-8 ``bytes``).

        Returns:
            The layout.

        Raises:
            ValueError: The record is not JSON, not an object, has an unsupported
                ``version``, a missing or unknown field, a field that is not an integer,
                or values that are not a valid layout.
        """
        try:
            record: Any = json.loads(s)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"malformed layout record: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise ValueError(
                f"malformed layout record: expected an object, got {type(record).__name__}"
            )
        version = record.get("version")
        if type(version) is not int or version != LAYOUT_VERSION:
            raise ValueError(
                f"malformed layout record: unsupported version {version!r} "
                f"(expected {LAYOUT_VERSION})"
            )
        missing = _FIELDS - record.keys()
        unknown = record.keys() - _FIELDS
        if missing or unknown:
            raise ValueError(
                "malformed layout record: "
                + "; ".join(
                    part
                    for part in (
                        f"missing {sorted(missing)}" if missing else "",
                        f"unknown {sorted(unknown)}" if unknown else "",
                    )
                    if part
                )
            )
        for name in ("initial", "active", "epoch"):
            value = record[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(
                    f"malformed layout record: {name} must be an integer, got {value!r}"
                )
        try:
            return cls(record["initial"], record["active"], record["epoch"])
        except ValueError as exc:
            raise ValueError(f"malformed layout record: {exc}") from None

"""``Layout``: one epoch's partition layout of a topic, and its JSON record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from linear_hash.flow import key_flow
from linear_hash.hashing import DEFAULT_ALGORITHM
from linear_hash.router import Router, _check_counts, _check_int

__all__ = ["LAYOUT_VERSION", "Layout"]

LAYOUT_VERSION: Final = 1
"""The ``version`` written by :meth:`Layout.to_json` and accepted by ``from_json``."""

_FIELDS: Final = frozenset({"version", "initial", "active", "epoch"})


@dataclass(frozen=True, slots=True)
class Layout(Router):
    """The linear-hashing layout of a topic in one epoch: a murmur3 :class:`Router`.

    Immutable and hashable; equality and hashing use ``initial``, ``active`` and
    ``epoch``. The routing moduli are computed once, so :meth:`partition_for` (the
    router's :meth:`~linear_hash.Router.partition`) is the fastest way to place many
    keys under one layout.

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

    def __post_init__(self) -> None:
        _check_counts(self.initial, self.active)
        _check_int(self.epoch, "epoch")
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        self._setup(self.initial, self.active, DEFAULT_ALGORITHM, None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Layout, (self.initial, self.active, self.epoch))

    @property
    def level(self) -> int:
        """``L``: the largest integer with ``initial * 2**L <= active``."""
        return (self._low // self.initial).bit_length() - 1

    @property
    def split(self) -> int:
        """``S = active - initial * 2**L``: the next partition to split on growth."""
        return self.active - self._low

    partition_for = Router.partition
    """Return the partition of a record key under this layout (murmur3 unless
    ``algorithm`` names another); see :meth:`linear_hash.Router.partition`."""

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

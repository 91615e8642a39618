"""The one schema mechanism of the znode records: field checkers and the ``_Record`` base.

A record class (in :mod:`coordinator.kernel.store.records`) is a frozen dataclass deriving from
:class:`_Record`; its ``_CHECKS`` maps every field to a checker here (JSON value ->
Python value, raising :class:`_Bad`), its ``VERSION`` is the version it writes and its
``_UPGRADES`` turn older versions into the current fields. JSON is UTF-8 with sorted
keys and compact separators, so the bytes on disk do not depend on this code's layout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, ClassVar, Final, Self, TypeAlias

from coordinator.kernel.errors import RecordCorruptError
from linear_hash import ALGORITHMS

__all__ = ["EPOCH_STATES", "RECORD_VERSION", "RETIRED_STATES"]

RECORD_VERSION: Final = 1
"""The first schema version: the ``version`` of every record class that has not changed
since (all but ``TopicRecord``, whose ``VERSION`` is 2)."""

EPOCH_STATES: Final = ("pending", "sealed")
"""The values of ``EpochRecord.state``."""

RETIRED_STATES: Final = ("draining", "trimmed")
"""The values of ``RetiredRecord.state``."""


class _Bad(ValueError):
    """One field failed its check; the message names the problem."""


# --- field checkers: JSON value -> Python value, raising _Bad -----------------------


def _int(value: Any) -> int:
    # bool is an int subclass; a true/false in an int field is corruption.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"expected an integer, got {value!r}")
    return value


def _nonneg(value: Any) -> int:
    n = _int(value)
    if n < 0:
        raise _Bad(f"expected an integer >= 0, got {n}")
    return n


def _opt_nonneg(value: Any) -> int | None:
    return None if value is None else _nonneg(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {value!r}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"expected true or false, got {value!r}")
    return value


def _time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"expected a unix time, got {value!r}")
    return float(value)


def _opt_time(value: Any) -> float | None:
    return None if value is None else _time(value)


def _partition_key(key: Any) -> int:
    if isinstance(key, bool):
        raise _Bad(f"expected a partition number as key, got {key!r}")
    if isinstance(key, int):
        n = key
    elif isinstance(key, str) and key.isascii() and key.isdigit():
        n = int(key)
    else:
        raise _Bad(f"expected a partition number as key, got {key!r}")
    if n < 0:
        raise _Bad(f"expected a partition number >= 0 as key, got {n}")
    return n


def _offsets(value: Any) -> dict[int, int]:
    if not isinstance(value, Mapping):
        raise _Bad(f"expected an object of partition -> offset, got {value!r}")
    out = {_partition_key(k): _int(v) for k, v in value.items()}
    if len(out) != len(value):
        raise _Bad("duplicate partition keys")
    return dict(sorted(out.items()))


def _edges(value: Any) -> tuple[tuple[int, int], ...]:
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise _Bad(f"expected a list of [source, destination], got {value!r}")
    out = []
    for edge in value:
        if not isinstance(edge, list | tuple) or len(edge) != 2:
            raise _Bad(f"expected an edge [source, destination], got {edge!r}")
        out.append((_nonneg(edge[0]), _nonneg(edge[1])))
    return tuple(out)


def _str_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise _Bad(f"expected a list of strings, got {value!r}")
    return tuple(_str(v) for v in value)


def _expired(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise _Bad(f"expected an object of producer id -> unix time, got {value!r}")
    return {_str(k): _time(v) for k, v in sorted(value.items())}


def _timeouts(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise _Bad(f"expected an object of producer id -> milliseconds, got {value!r}")
    return {_str(k): _nonneg(v) for k, v in sorted(value.items())}


def _opt_topic_id(value: Any) -> str | None:
    if value is None:
        return None
    text = _str(value)
    if not text:
        raise _Bad("expected a Kafka topic id, got an empty string")
    return text


def _waits(value: Any) -> dict[int, int]:
    offsets = _offsets(value)
    for partition, offset in offsets.items():
        if offset < 0:
            raise _Bad(f"expected an offset >= 0 for partition {partition}, got {offset}")
    return offsets


def _one_of(what: str, known: tuple[str, ...]) -> Callable[[Any], str]:
    """A check that a field names one of ``known`` (a ``what``)."""

    def check(value: Any) -> str:
        name = _str(value)
        if name not in known:
            raise _Bad(f"unknown {what} {name!r} (known: {', '.join(known)})")
        return name

    return check


_algorithm = _one_of("algorithm", tuple(sorted(ALGORITHMS)))
_state = _one_of("epoch state", EPOCH_STATES)
_retired_state = _one_of("retired state", RETIRED_STATES)


def _positive(value: Any) -> int:
    n = _int(value)
    if n < 1:
        raise _Bad(f"expected an integer >= 1, got {n}")
    return n


def _owners(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise _Bad(f"expected an object of group -> identities, got {value!r}")
    return {_str(k): _str_tuple(v) for k, v in value.items()}


def _to_json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _to_json_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_to_json_value(v) for v in value]
    return value


_Upgrade: TypeAlias = Callable[[dict[str, Any]], dict[str, Any]]


class _Record:
    """Shared JSON handling: ``_CHECKS`` maps every field to its checker.

    ``VERSION`` is the version written; ``_UPGRADES`` maps each older version still
    read to a function that turns its fields into the current ones.
    """

    VERSION: ClassVar[int] = RECORD_VERSION
    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]]
    _UPGRADES: ClassVar[dict[int, _Upgrade]] = {}

    def _normalise(self) -> None:
        for name, check in self._CHECKS.items():
            try:
                value = check(getattr(self, name))
            except _Bad as exc:
                raise ValueError(f"{type(self).__name__}.{name}: {exc}") from None
            object.__setattr__(self, name, value)
        self._check_invariants()

    def _check_invariants(self) -> None:
        """Cross-field checks; raise ``ValueError``."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready dict, with ``version``."""
        data = {f.name: _to_json_value(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]
        data["version"] = self.VERSION
        return data

    def to_json(self) -> bytes:
        """Serialise to UTF-8 JSON with sorted keys and ``"version"``."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def _version_problem(cls, path: str, version: object) -> str:
        """What a reader says of a record whose ``version`` it does not read.

        A version above every one this code knows comes from a newer release (a client
        not yet upgraded in a rolling upgrade meets it): the message names the record
        kind, the version found and the newest known, and says what to do, since
        "corrupt" alone would send an operator looking for damage that is not there.
        Anything else (an older version no longer read, a version that is no integer)
        is damage.
        """
        name = cls.__name__
        known = sorted({*cls._UPGRADES, cls.VERSION})
        if isinstance(version, int) and not isinstance(version, bool) and version > known[-1]:
            return (
                f"{path}: {name} has version {version}, newer than {known[-1]}, the newest "
                f"this ordered-kafka reads: a newer ordered-kafka wrote it; upgrade this "
                f'client (see "Upgrading" in docs/operations.md)'
            )
        listed = ", ".join(str(v) for v in known)
        return f"{path}: {name} record has version {version!r}; this ordered reads version {listed}"

    @classmethod
    def from_json(cls, data: bytes, path: str) -> Self:
        """Parse and check a record read from the znode ``path``.

        Args:
            data: The znode's data.
            path: The znode path, for the error message.

        Returns:
            The record.

        Raises:
            StoreError: The data is not a valid record of this type and version.
        """
        name = cls.__name__
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise RecordCorruptError(f"{path}: not a JSON {name} record ({exc})") from None
        if not isinstance(raw, dict):
            raise RecordCorruptError(f"{path}: not a JSON {name} record (not an object)")
        if "version" not in raw:
            raise RecordCorruptError(f"{path}: {name} record has no 'version'")
        version = raw.pop("version")
        if version != cls.VERSION:
            upgrade = (
                None
                if isinstance(version, bool) or not isinstance(version, int)
                else cls._UPGRADES.get(version)
            )
            if upgrade is None:
                raise RecordCorruptError(cls._version_problem(path, version))
            raw = upgrade(raw)
        expected = set(cls._CHECKS)
        missing = sorted(expected - set(raw))
        extra = sorted(set(raw) - expected)
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing field(s) {', '.join(missing)}")
            if extra:
                problems.append(f"unknown field(s) {', '.join(extra)}")
            raise RecordCorruptError(f"{path}: bad {name} record: {'; '.join(problems)}")
        try:
            return cls(**raw)
        except (ValueError, TypeError) as exc:
            raise RecordCorruptError(f"{path}: bad {name} record: {exc}") from None

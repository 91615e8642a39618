"""Key hashing: the hash functions a key may be placed with.

Three algorithms are supported; each maps a key to a non-negative 32-bit integer that
:func:`linear_hash.routing.route` then turns into a partition:

* ``"murmur3"`` (default): MurmurHash3 x86 32-bit, seed 0, unsigned (``mmh3``).
* ``"murmur2"``: exactly the Java client's default partitioner,
  ``Utils.toPositive(Utils.murmur2(key))``. With ``active == initial`` a topic adopted
  from the Java default partitioner keeps every key where it already is.
* ``"crc32"``: librdkafka's ``consistent`` / ``consistent_random`` partitioner, the
  standard CRC-32 (``zlib.crc32``).

Keys may be ``str`` (encoded as UTF-8, which is what confluent-kafka's ``Producer``
does with a ``str`` key, so a key hashes the same whichever form the caller passes) or
any bytes-like object (``bytes``, ``bytearray``, ``memoryview``, or anything else
exporting the buffer protocol; its raw bytes are hashed). Anything else, ``None``
included, is a :class:`TypeError`: records without a key are not placed by hash.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Final, TypeAlias

import mmh3

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "Key",
    "hash_key",
    "murmur2",
]

Key: TypeAlias = str | bytes | bytearray | memoryview
"""A record key: ``str`` (hashed as UTF-8) or bytes-like."""

DEFAULT_ALGORITHM: Final = "murmur3"
"""The algorithm used when none is named."""

ALGORITHMS: Final = ("murmur3", "murmur2", "crc32")
"""Every valid ``algorithm`` name."""

_MASK32: Final = 0xFFFFFFFF
_M2_SEED: Final = 0x9747B28C
_M2_M: Final = 0x5BD1E995

# Bound once: the hot path then does one fast global load instead of an attribute
# lookup on the module.
_mmh3_hash = mmh3.hash


def _key_error(key: object, name: str) -> TypeError:
    return TypeError(
        f"{name} must be str or a bytes-like object, not {type(key).__name__}"
        " (records without a key are not placed by hash)"
    )


def _as_bytes(key: object, name: str = "key") -> bytes:
    """Return the bytes a key is hashed as, or raise naming the argument ``name``."""
    if type(key) is bytes:
        return key
    if isinstance(key, str):
        try:
            return key.encode("utf-8")
        except UnicodeEncodeError as exc:
            # Lone surrogates cannot be sent by confluent-kafka either.
            raise ValueError(f"{name} is not encodable as UTF-8: {exc.reason}") from None
    try:
        with memoryview(key) as view:  # type: ignore[arg-type]
            return view.tobytes()
    except TypeError:
        raise _key_error(key, name) from None


def _murmur3(key: object) -> int:
    # mmh3.hash takes bytes and str directly, but (mmh3 5.3) crashes the interpreter on
    # a str that is not encodable as UTF-8 and rejects bytearray/memoryview: only bytes
    # and ASCII str (no copy, cheap check) go straight through.
    t = type(key)
    if t is not bytes and (t is not str or not key.isascii()):  # type: ignore[attr-defined]
        key = _as_bytes(key)
    return _mmh3_hash(key, 0, False)  # type: ignore[arg-type]


def murmur2(data: Key) -> int:
    """Kafka's Java ``Utils.murmur2``: the signed 32-bit MurmurHash2 of ``data``.

    Seed ``0x9747b28c``, ``m = 0x5bd1e995``, ``r = 24``, little-endian 4-byte chunks and
    Java's fall-through tail switch, all in 32-bit arithmetic. The result is signed,
    exactly as Java returns it, so Kafka's published test vectors compare directly;
    :func:`hash_key` with ``"murmur2"`` applies ``toPositive`` (``& 0x7fffffff``).

    Args:
        data: The bytes to hash; a ``str`` is hashed as its UTF-8 encoding.

    Returns:
        The hash as a signed 32-bit integer.

    Raises:
        TypeError: ``data`` is neither ``str`` nor bytes-like.
        ValueError: ``data`` is a ``str`` that is not encodable as UTF-8.
    """
    return _murmur2(_as_bytes(data, "data"))


def _murmur2(buf: bytes) -> int:
    length = len(buf)
    m = _M2_M
    h = (_M2_SEED ^ length) & _MASK32
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", buf):
            k = (k * m) & _MASK32
            k ^= k >> 24
            k = (k * m) & _MASK32
            h = ((h * m) & _MASK32) ^ k
    tail = length & 3
    if tail:
        base = length - tail
        # Java's switch falls through from case 3 to case 1.
        if tail == 3:
            h ^= buf[base + 2] << 16
        if tail >= 2:
            h ^= buf[base + 1] << 8
        h ^= buf[base]
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def _murmur2_positive(key: object) -> int:
    return _murmur2(_as_bytes(key)) & 0x7FFFFFFF


def _crc32(key: object) -> int:
    return zlib.crc32(_as_bytes(key)) & _MASK32


_HASHERS: Final[dict[str, Callable[[object], int]]] = {
    "murmur3": _murmur3,
    "murmur2": _murmur2_positive,
    "crc32": _crc32,
}


def _unknown_algorithm(algorithm: object) -> ValueError:
    return ValueError(
        f"algorithm must be one of {', '.join(map(repr, ALGORITHMS))}; got {algorithm!r}"
    )


def _hasher_for(algorithm: str) -> Callable[[object], int]:
    try:
        return _HASHERS[algorithm]
    except (KeyError, TypeError):
        raise _unknown_algorithm(algorithm) from None


def hash_key(key: Key, algorithm: str = DEFAULT_ALGORITHM) -> int:
    """Hash a record key to a non-negative 32-bit integer.

    Args:
        key: The record key. A ``str`` is hashed as its UTF-8 bytes (as confluent-kafka
            sends it); any bytes-like object is hashed as its raw bytes.
        algorithm: ``"murmur3"`` (default, ``mmh3.hash(key, 0, signed=False)``),
            ``"murmur2"`` (Java client: ``murmur2(key) & 0x7fffffff``) or ``"crc32"``
            (librdkafka ``consistent``: ``zlib.crc32(key)``).

    Returns:
        The hash, in ``[0, 2**32)`` (``[0, 2**31)`` for ``"murmur2"``).

    Raises:
        TypeError: ``key`` is neither ``str`` nor bytes-like (``None`` included).
        ValueError: ``algorithm`` is unknown, or ``key`` is a ``str`` that is not
            encodable as UTF-8.
    """
    return _hasher_for(algorithm)(key)

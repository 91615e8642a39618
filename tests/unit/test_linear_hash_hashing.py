"""Key hashing: Kafka/librdkafka compatibility, known answers, bad input."""

from __future__ import annotations

import zlib

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_linear_hash_routing import naive_route

from linear_hash import ALGORITHMS, DEFAULT_ALGORITHM, Layout, hash_key, murmur2, partition_for

MASK = 0xFFFFFFFF

# --- Independent reference implementations (deliberately written differently) ---------


def _i32(x: int) -> int:
    """Java int overflow."""
    x &= MASK
    return x - (1 << 32) if x >= 1 << 31 else x


def java_murmur2(data: bytes) -> int:
    """Line-by-line transcription of Kafka's Java Utils.murmur2, signed ints throughout."""
    length = len(data)
    seed = _i32(0x9747B28C)
    m = 0x5BD1E995
    r = 24
    h = _i32(seed ^ length)
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (
            (data[i4 + 0] & 0xFF)
            + ((data[i4 + 1] & 0xFF) << 8)
            + ((data[i4 + 2] & 0xFF) << 16)
            + ((data[i4 + 3] & 0xFF) << 24)
        )
        k = _i32(k)
        k = _i32(k * m)
        k = _i32(k ^ ((k & MASK) >> r))  # >>> is an unsigned shift
        k = _i32(k * m)
        h = _i32(h * m)
        h = _i32(h ^ k)
    rest = length % 4
    base = length & ~3
    if rest == 3:
        h = _i32(h ^ ((data[base + 2] & 0xFF) << 16))
    if rest >= 2:
        h = _i32(h ^ ((data[base + 1] & 0xFF) << 8))
    if rest >= 1:
        h = _i32(h ^ (data[base] & 0xFF))
        h = _i32(h * m)
    h = _i32(h ^ ((h & MASK) >> 13))
    h = _i32(h * m)
    h = _i32(h ^ ((h & MASK) >> 15))
    return h


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def naive_murmur3(data: bytes) -> int:
    """MurmurHash3 x86 32-bit, seed 0, unsigned (reference C code, transcribed)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = 0
    n = len(data)
    body = n - n % 4
    for i in range(0, body, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = _rotl((k * c1) & MASK, 15)
        h ^= (k * c2) & MASK
        h = (_rotl(h, 13) * 5 + 0xE6546B64) & MASK
    k = 0
    tail = data[body:]
    for shift, byte in reversed(list(enumerate(tail))):
        k ^= byte << (8 * shift)
    if tail:
        k = _rotl((k * c1) & MASK, 15)
        h ^= (k * c2) & MASK
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK
    h ^= h >> 16
    return h


def naive_crc32(data: bytes) -> int:
    """Bitwise reflected CRC-32 (poly 0xEDB88320), as librdkafka's rd_crc32."""
    crc = MASK
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ MASK


NAIVE = {
    "murmur3": naive_murmur3,
    "murmur2": lambda b: java_murmur2(b) & 0x7FFFFFFF,
    "crc32": naive_crc32,
}


def _b(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


# --- Published vectors ------------------------------------------------------------------

# Kafka clients UtilsTest.testMurmur2: raw signed Utils.murmur2 values.
KAFKA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_MURMUR2)
def test_murmur2_matches_kafka_java_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert java_murmur2(data) == expected
    assert hash_key(data, "murmur2") == expected & 0x7FFFFFFF


def test_murmur2_accepts_str_as_utf8() -> None:
    assert murmur2("foobar") == -790332482
    assert murmur2("ключ") == murmur2("ключ".encode())


def test_crc32_check_value() -> None:
    assert zlib.crc32(b"123456789") == 0xCBF43926
    assert naive_crc32(b"123456789") == 0xCBF43926
    assert hash_key(b"123456789", "crc32") == 0xCBF43926


def test_murmur3_is_mmh3_unsigned_seed_0() -> None:
    assert hash_key(b"foo") == mmh3.hash(b"foo", 0, signed=False) == 4138058784
    assert naive_murmur3(b"foo") == 4138058784


# --- Known answers: any change of placement must fail loudly ----------------------------

KEYS: list[str | bytes] = [
    "",
    "a",
    "abc",
    "foobar",
    "user-1",
    "order-42",
    "customer-000017",
    "ключ",
    "鍵-7",
    "a-little-bit-longer-string",
    b"\x00",
    b"\xff\xfe\xfd\xfc\xfb",
    bytes(range(17)),
]
PAIRS = [(1, 1), (1, 5), (3, 3), (3, 7), (4, 6), (6, 13), (12, 40), (32, 100)]

# KNOWN[algorithm][i] = (hash_key(KEYS[i]), [partition_for(KEYS[i], n, u) for (n, u) in PAIRS])
KNOWN: dict[str, list[tuple[int, list[int]]]] = {
    "murmur3": [
        (0, [0, 0, 0, 0, 0, 0, 0, 0]),
        (1009084850, [0, 2, 2, 2, 2, 2, 2, 50]),
        (3017643002, [0, 2, 2, 2, 2, 2, 26, 58]),
        (2764362941, [0, 1, 2, 5, 5, 5, 29, 61]),
        (4171401059, [0, 3, 2, 5, 3, 11, 35, 99]),
        (1259446670, [0, 2, 2, 2, 2, 2, 14, 14]),
        (2149065244, [0, 4, 1, 4, 4, 4, 28, 28]),
        (2589532226, [0, 2, 2, 2, 2, 2, 2, 66]),
        (583200234, [0, 2, 0, 6, 2, 6, 18, 42]),
        (1005410872, [0, 0, 1, 4, 0, 4, 16, 56]),
        (1364076727, [0, 3, 1, 1, 3, 7, 7, 55]),
        (717200571, [0, 3, 0, 3, 3, 3, 27, 59]),
        (3420818886, [0, 2, 0, 6, 2, 6, 6, 70]),
    ],
    "murmur2": [
        (275646681, [0, 1, 0, 3, 1, 9, 9, 89]),
        (584102524, [0, 4, 1, 4, 4, 4, 28, 60]),
        (479470107, [0, 3, 0, 3, 3, 3, 27, 27]),
        (1357151166, [0, 2, 0, 6, 2, 6, 30, 62]),
        (1404122828, [0, 4, 2, 2, 4, 8, 20, 76]),
        (501153024, [0, 0, 0, 0, 0, 0, 0, 0]),
        (2065945617, [0, 1, 0, 3, 1, 9, 33, 17]),
        (2122343024, [0, 0, 2, 2, 0, 8, 32, 48]),
        (1836284243, [0, 3, 2, 5, 3, 11, 35, 83]),
        (661178819, [0, 3, 2, 5, 3, 11, 35, 67]),
        (375494588, [0, 4, 2, 2, 4, 8, 20, 60]),
        (524068735, [0, 3, 1, 1, 3, 7, 31, 63]),
        (1100346375, [0, 3, 0, 3, 3, 3, 39, 7]),
    ],
    "crc32": [
        (0, [0, 0, 0, 0, 0, 0, 0, 0]),
        (3904355907, [0, 3, 0, 3, 3, 3, 3, 67]),
        (891568578, [0, 2, 0, 6, 2, 6, 18, 66]),
        (2666930069, [0, 1, 2, 5, 5, 5, 5, 21]),
        (2116437524, [0, 4, 2, 2, 4, 8, 20, 20]),
        (1475806942, [0, 2, 1, 4, 2, 10, 22, 94]),
        (1946926167, [0, 3, 0, 3, 3, 3, 39, 87]),
        (212833818, [0, 2, 0, 6, 2, 6, 18, 26]),
        (2815950670, [0, 2, 1, 4, 2, 10, 22, 78]),
        (2277486890, [0, 2, 2, 2, 2, 2, 26, 42]),
        (3523407757, [0, 1, 1, 1, 5, 1, 13, 13]),
        (1166357667, [0, 3, 0, 3, 3, 3, 3, 35]),
        (739785241, [0, 1, 1, 1, 1, 1, 25, 25]),
    ],
}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_known_table_agrees_with_naive_reference(algorithm: str) -> None:
    """The hard-coded table itself is right: an independent implementation agrees."""
    for key, (h, parts) in zip(KEYS, KNOWN[algorithm], strict=True):
        assert NAIVE[algorithm](_b(key)) == h, key
        assert [naive_route(h, n, u) for n, u in PAIRS] == parts, key


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_known_answers(algorithm: str) -> None:
    for key, (h, parts) in zip(KEYS, KNOWN[algorithm], strict=True):
        assert hash_key(key, algorithm) == h, key
        assert [partition_for(key, n, u, algorithm) for n, u in PAIRS] == parts, key
        assert [Layout(n, u).partition_for(key, algorithm) for n, u in PAIRS] == parts, key


def test_default_algorithm_is_murmur3() -> None:
    assert DEFAULT_ALGORITHM == "murmur3"
    assert ALGORITHMS == ("murmur3", "murmur2", "crc32")
    assert hash_key("user-1") == hash_key("user-1", "murmur3") == 4171401059


# --- Properties against the references ---------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=64))
def test_hashes_match_references_on_random_bytes(data: bytes) -> None:
    for algorithm in ALGORITHMS:
        assert hash_key(data, algorithm) == NAIVE[algorithm](data)
    assert murmur2(data) == java_murmur2(data)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=32))
def test_str_key_is_its_utf8_bytes(text: str) -> None:
    encoded = text.encode("utf-8")
    for algorithm in ALGORITHMS:
        assert hash_key(text, algorithm) == hash_key(encoded, algorithm)
        assert partition_for(text, 3, 11, algorithm) == partition_for(encoded, 3, 11, algorithm)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=40), n=st.integers(1, 500))
def test_adopting_a_java_topic_moves_no_key(data: bytes, n: int) -> None:
    """With active == initial, murmur2 placement is the Java default partitioner's."""
    java_partition = (java_murmur2(data) & 0x7FFFFFFF) % n
    assert partition_for(data, n, n, "murmur2") == java_partition
    assert Layout(n, n).partition_for(data, "murmur2") == java_partition


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=40), n=st.integers(1, 500))
def test_adopting_a_librdkafka_consistent_topic_moves_no_key(data: bytes, n: int) -> None:
    assert partition_for(data, n, n, "crc32") == (zlib.crc32(data) & MASK) % n


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_hash_is_non_negative_32_bit(algorithm: str) -> None:
    for i in range(2000):
        h = hash_key(f"k{i}", algorithm)
        assert 0 <= h < 2**32
        if algorithm == "murmur2":
            assert h < 2**31


def test_bytes_like_keys_hash_as_their_bytes() -> None:
    for algorithm in ALGORITHMS:
        expected = hash_key(b"h\xc3\xa9llo", algorithm)
        assert hash_key(bytearray(b"h\xc3\xa9llo"), algorithm) == expected
        assert hash_key(memoryview(b"h\xc3\xa9llo"), algorithm) == expected
        assert hash_key("héllo", algorithm) == expected
        assert partition_for(bytearray(b"h\xc3\xa9llo"), 2, 7, algorithm) == partition_for(
            b"h\xc3\xa9llo", 2, 7, algorithm
        )


# --- Bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("key", [None, 5, True, 1.5, ["a"], object()])
def test_non_key_types_raise_type_error_naming_key(algorithm: str, key: object) -> None:
    with pytest.raises(TypeError, match=r"^key must be str or a bytes-like object"):
        hash_key(key, algorithm)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^key must be"):
        partition_for(key, 2, 3, algorithm)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^key must be"):
        Layout(2, 3).partition_for(key, algorithm)  # type: ignore[arg-type]


def test_murmur2_bad_data_names_data() -> None:
    with pytest.raises(TypeError, match=r"^data must be str or a bytes-like object"):
        murmur2(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_unencodable_str_is_a_value_error_not_a_crash(algorithm: str) -> None:
    """mmh3 5.3 segfaults on a lone surrogate; we must never hand it one."""
    for bad in ("\ud800", "ok\udfffok"):
        with pytest.raises(ValueError, match=r"^key is not encodable as UTF-8"):
            hash_key(bad, algorithm)
        with pytest.raises(ValueError, match=r"^key is not encodable as UTF-8"):
            partition_for(bad, 1, 4, algorithm)
        with pytest.raises(ValueError, match=r"^key is not encodable as UTF-8"):
            Layout(1, 4).partition_for(bad, algorithm)


def test_str_subclass_goes_through_the_checked_path() -> None:
    class Name(str):
        pass

    assert hash_key(Name("abc")) == hash_key("abc")
    assert partition_for(Name("abc"), 3, 7) == partition_for("abc", 3, 7)
    with pytest.raises(ValueError, match="key is not encodable"):
        partition_for(Name("\ud800"), 3, 7)


@pytest.mark.parametrize("algorithm", ["md5", "MURMUR3", "", "murmur", None, 3])
def test_unknown_algorithm_raises_value_error_listing_valid_ones(algorithm: object) -> None:
    pattern = r"^algorithm must be one of 'murmur3', 'murmur2', 'crc32'"
    with pytest.raises(ValueError, match=pattern):
        hash_key(b"k", algorithm)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=pattern):
        partition_for(b"k", 1, 2, algorithm)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=pattern):
        Layout(1, 2).partition_for(b"k", algorithm)  # type: ignore[arg-type]


def test_unhashable_algorithm_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"^algorithm must be one of"):
        hash_key(b"k", ["murmur3"])  # type: ignore[arg-type]

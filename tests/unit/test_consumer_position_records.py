"""Position service records (pure): round trips and strict checks on read.

They are records of :mod:`coordinator.kernel.store.records` like every znode's, with the same
strict reading; the on-disk format is the one they had before (version 1).
"""

from __future__ import annotations

import pytest

from coordinator.kernel.errors import StoreError
from coordinator.kernel.positions import Interest, Progress


def test_round_trips() -> None:
    interest = Interest("m-1", {3: 40, 1: 7}, 12.5)
    assert Interest.from_json(interest.to_json(), "/p") == interest
    assert interest.to_json() == (b'{"at":12.5,"member":"m-1","version":1,"waits":{"1":7,"3":40}}')
    progress = Progress(2, 99, 1.0)
    assert Progress.from_json(progress.to_json(), "/p") == progress


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"nope", "not a JSON Progress record"),
        (b"[]", "not an object"),
        (
            b'{"version":2,"partition":1,"offset":2,"at":1}',
            "Progress has version 2, newer than 1, the newest this ordered-kafka reads",
        ),
        (b'{"version":1,"partition":1,"at":1}', r"missing field\(s\) offset"),
        (b'{"version":1,"partition":1,"offset":2,"at":1,"x":0}', r"unknown field\(s\) x"),
        (b'{"version":1,"partition":1,"offset":-2,"at":1}', "offset: expected an integer >= 0"),
        (b'{"version":1,"partition":true,"offset":2,"at":1}', "partition: expected an integer"),
        (b'{"version":1,"partition":1,"offset":2,"at":"now"}', "at: expected a unix time"),
    ],
)
def test_progress_checked(data: bytes, message: str) -> None:
    with pytest.raises(StoreError, match=message) as info:
        Progress.from_json(data, "/g/progress/t/1")
    assert "/g/progress/t/1" in str(info.value)


def test_interest_checked() -> None:
    with pytest.raises(StoreError, match="waits: expected a partition number"):
        Interest.from_json(b'{"version":1,"member":"m","waits":{"x":1},"at":1}', "/i")
    with pytest.raises(StoreError, match="waits: expected an offset >= 0"):
        Interest.from_json(b'{"version":1,"member":"m","waits":{"1":-1},"at":1}', "/i")
    with pytest.raises(StoreError, match="member: expected a string"):
        Interest.from_json(b'{"version":1,"member":3,"waits":{},"at":1}', "/i")


def test_same_bytes_as_the_former_format() -> None:
    # Written by the position service before it moved onto the records module.
    old = b'{"at":1.5,"offset":9,"partition":0,"version":1}'
    assert Progress.from_json(old, "/p") == Progress(0, 9, 1.5)
    assert Progress(0, 9, 1.5).to_json() == old
    assert Interest("m", {"2": 3}, 2.0).waits == {2: 3}

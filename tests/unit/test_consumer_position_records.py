"""Position service records (pure): round trips and strict checks on read."""

from __future__ import annotations

import pytest

from coordinator.errors import StoreError
from coordinator.positions import Interest, Progress


def test_round_trips() -> None:
    interest = Interest("m-1", {3: 40, 1: 7}, 12.5)
    assert Interest.from_json(interest.to_json(), "/p") == interest
    assert interest.to_json() == (b'{"at":12.5,"member":"m-1","version":1,"waits":{"1":7,"3":40}}')
    progress = Progress(2, 99, 1.0)
    assert Progress.from_json(progress.to_json(), "/p") == progress


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"nope", "not JSON"),
        (b"[]", "expected an object"),
        (b'{"version":2,"partition":1,"offset":2,"at":1}', "unsupported version"),
        (b'{"version":1,"partition":1,"at":1}', "differ from the expected"),
        (b'{"version":1,"partition":1,"offset":2,"at":1,"x":0}', "differ from the expected"),
        (b'{"version":1,"partition":1,"offset":-2,"at":1}', "non-negative"),
        (b'{"version":1,"partition":true,"offset":2,"at":1}', "non-negative"),
        (b'{"version":1,"partition":1,"offset":2,"at":"now"}', "at must be a number"),
    ],
)
def test_progress_checked(data: bytes, message: str) -> None:
    with pytest.raises(StoreError, match=message) as info:
        Progress.from_json(data, "/g/progress/t/1")
    assert "/g/progress/t/1" in str(info.value)


def test_interest_checked() -> None:
    with pytest.raises(StoreError, match="bad waits"):
        Interest.from_json(b'{"version":1,"member":"m","waits":{"x":1},"at":1}', "/i")
    with pytest.raises(StoreError, match="member must be a string"):
        Interest.from_json(b'{"version":1,"member":3,"waits":{},"at":1}', "/i")

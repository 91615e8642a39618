"""Type stub of the optional compiled send path (``ordered/_fastproduce.c``)."""

from collections.abc import Callable
from typing import Any

class FastProduce:
    """``FastProduce(rd_produce, slow, table)``: the compiled send path."""

    def __init__(
        self,
        rd_produce: Callable[..., None],
        slow: Callable[..., None],
        table: dict[str, tuple[int, int, int] | None],
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...

class OnlyError:
    """``OnlyError(user)``: a delivery callback calling ``user(err, msg)`` for failures only."""

    def __init__(self, user: Callable[[Any, Any], None]) -> None: ...
    def __call__(self, err: Any, msg: Any) -> None: ...

def partition(key: bytes | str, high: int, low: int, active: int) -> int:
    """The linear-hashing partition of ``key`` (murmur3), as ``Layout.partition_for``."""

def hash(key: bytes | str) -> int:
    """murmur3_x86_32 of ``key`` with seed 0, unsigned (as ``mmh3.hash(key, 0, False)``)."""

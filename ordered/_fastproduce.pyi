"""Type stub of the optional compiled send path (``ordered/_fastproduce.c``)."""

from collections.abc import Callable
from typing import Any

from linear_hash import Router as PyRouter

class Router:
    """``Router(router)``: the compiled twin of a murmur3 ``linear_hash.Router``."""

    def __init__(self, router: PyRouter) -> None: ...
    @property
    def initial(self) -> int: ...
    @property
    def active(self) -> int: ...
    def partition(self, key: Any) -> int:
        """The partition of ``key``, as ``linear_hash.Router.partition``."""

class SendPath:
    """The C base of the compiled producer class: ``produce`` is the compiled send path."""

    def _bind_send_path(
        self,
        rd_produce: Callable[..., None],
        table: dict[str, Router | None],
        slow: Callable[..., None],
    ) -> None: ...
    def produce(self, *args: Any, **kwargs: Any) -> None: ...

class OnlyError:
    """``OnlyError(user)``: a delivery callback calling ``user(err, msg)`` for failures only."""

    def __init__(self, user: Callable[[Any, Any], None]) -> None: ...
    def __call__(self, err: Any, msg: Any) -> None: ...

def partition(key: bytes | str, high: int, low: int, active: int) -> int:
    """``route_hash`` of murmur3(``key``) by explicit moduli (usually: ``Router(r).partition``)."""

def hash(key: bytes | str) -> int:
    """murmur3_x86_32 of ``key`` with seed 0, unsigned (as ``mmh3.hash(key, 0, False)``)."""

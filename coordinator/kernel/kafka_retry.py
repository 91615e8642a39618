"""The one retry policy for Kafka calls: bounded tries, backoff with jitter, one predicate.

Every place that calls Kafka again after a transient failure goes through
:class:`RetryPolicy`: the controller waiting for the leaders of new partitions, the
admin helper's ListOffsets, the trimmer's DeleteRecords rounds; the loops that wait for
a server to come back (the daemon's election rounds, the commit tail's assignment) take
their pauses from it. It follows the design of kazoo's ``KazooRetry`` (which every
ZooKeeper call here goes through): a value object holding the limits, called with the
function to run, and a ``sleep`` and an ``interrupt`` the caller may replace (a stop
event's ``wait``, say). Unlike ``KazooRetry`` it takes a predicate instead of a fixed
list of exception types, and once the tries or the deadline are spent it raises the
last error itself, so the caller still sees the original ``KafkaError``.

:func:`kafka_retriable` is the predicate: an error carrying a ``KafkaError`` that
librdkafka marks retriable (``err.retriable()``) or whose code is one of
:data:`TRANSIENT_ERRORS`, the codes a just-created or just-moved partition reports
until its leader is ready.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from confluent_kafka import KafkaError, KafkaException

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "TRANSIENT_ERRORS",
    "RetryPolicy",
    "kafka_error_of",
    "kafka_retriable",
]

T = TypeVar("T")

TRANSIENT_ERRORS: Final[frozenset[int]] = frozenset(
    {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        # A partition just created or just moved: its leader's epoch is not yet the
        # one the metadata named.
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        # librdkafka's "No leaders found": its metadata does not name the leader of a
        # just-created partition yet (seen on three brokers right after an expansion).
        KafkaError._NOENT,
    }
)
"""Error codes a just-created or just-moved partition reports until its leader is ready."""


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` an exception carries, if any.

    A ``KafkaException`` carries it as its first argument; the layer's
    ``OrderedKafkaError`` as ``kafka_error``.
    """
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    carried = getattr(exc, "kafka_error", None)
    return carried if isinstance(carried, KafkaError) else None


def kafka_retriable(exc: BaseException) -> bool:
    """Whether a failed Kafka call is worth repeating: the one predicate.

    True when ``exc`` carries a ``KafkaError`` that is retriable (``err.retriable()``)
    or has one of the :data:`TRANSIENT_ERRORS` codes; false for anything else.
    """
    error = kafka_error_of(exc)
    return error is not None and (bool(error.retriable()) or error.code() in TRANSIENT_ERRORS)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a Kafka call is repeated.

    The pause after try ``n`` (from 0) is ``min(max_delay, delay * backoff**n)``, less
    up to ``jitter`` of it, drawn at random (so clients that failed together do not
    come back together), and never past the deadline.

    Attributes:
        max_tries: Tries in all, the first included (``None``: until the deadline, or
            forever without one).
        deadline: Seconds from the first try after which no new try starts (``None``:
            no deadline).
        delay: The first pause, in seconds.
        backoff: The factor each pause grows by.
        max_delay: The longest pause.
        jitter: The fraction (0 to 1) of a pause that may be taken off at random.
        retriable: Which errors are tried again; any other is raised at once.
    """

    max_tries: int | None = 5
    deadline: float | None = None
    delay: float = 0.1
    backoff: float = 2.0
    max_delay: float = 2.0
    jitter: float = 0.25
    retriable: Callable[[BaseException], bool] = kafka_retriable

    def __post_init__(self) -> None:
        if self.max_tries is not None and self.max_tries < 1:
            raise ValueError(f"max_tries must be at least 1, got {self.max_tries}")
        if self.delay < 0 or self.max_delay < 0 or self.backoff < 1:
            raise ValueError("delay and max_delay must be >= 0 and backoff >= 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be within [0, 1], got {self.jitter}")

    def pauses(self, rng: random.Random | None = None) -> Iterator[float]:
        """The pauses between tries, one per retry (endless; ``max_tries`` is not applied).

        For loops that wait by hand (between rounds of a batch, or until a server is
        back); :meth:`call` uses the same sequence.
        """
        draw = rng.random if rng is not None else random.random
        base = self.delay
        while True:
            capped = min(base, self.max_delay)
            yield capped * (1.0 - self.jitter * draw())
            base *= self.backoff

    def call(
        self,
        func: Callable[..., T],
        *args: Any,
        on_retry: Callable[[BaseException, int, float], object] | None = None,
        sleep: Callable[[float], object] = time.sleep,
        interrupt: Callable[[], bool] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``func(*args, **kwargs)``, trying again while it raises a retriable error.

        Args:
            func: The call.
            on_retry: Called before each pause with the error, the number of the try that
                failed (from 1) and the pause (for progress lines).
            sleep: Pauses (for example a stop event's ``wait``).
            interrupt: When it returns true after a failure, no new try starts.
            clock: Where the time is read (its ``monotonic``; a test's fake).
            rng: The jitter's random source (for tests).

        Returns:
            What ``func`` returned.

        Raises:
            BaseException: A non-retriable error at once; the last retriable one, as
                raised, once the tries or the deadline are spent or ``interrupt`` says so.
        """
        started = clock.monotonic()
        pauses = self.pauses(rng)
        tries = 0
        while True:
            tries += 1
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                if not self.retriable(exc):
                    raise
                if self.max_tries is not None and tries >= self.max_tries:
                    raise
                if interrupt is not None and interrupt():
                    raise
                pause = next(pauses)
                if self.deadline is not None:
                    left = started + self.deadline - clock.monotonic()
                    if left <= 0:
                        raise
                    pause = min(pause, left)
                if on_retry is not None:
                    on_retry(exc, tries, pause)
                sleep(pause)

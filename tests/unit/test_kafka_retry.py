"""The one retry policy for Kafka calls: tries, pauses, the predicate (pure, no Kafka)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from fakes import FakeClock

from coordinator.kernel.errors import OrderedKafkaError
from coordinator.kernel.kafka_retry import (
    TRANSIENT_ERRORS,
    RetryPolicy,
    kafka_error_of,
    kafka_retriable,
)


def failing(
    errors: list[BaseException], result: str = "done"
) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return calls, call


def transient() -> OrderedKafkaError:
    return OrderedKafkaError("no leader", KafkaError(KafkaError.LEADER_NOT_AVAILABLE))


def test_predicate_known_answers() -> None:
    assert kafka_retriable(transient())
    assert kafka_retriable(KafkaException(KafkaError(KafkaError._NOENT)))
    # librdkafka's own retriable flag counts as well, whatever the code
    assert kafka_retriable(KafkaException(KafkaError(KafkaError._FAIL, "x", retriable=True)))
    assert not kafka_retriable(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
    assert not kafka_retriable(OrderedKafkaError("no error attached"))
    assert not kafka_retriable(ValueError("not Kafka"))
    assert KafkaError.LEADER_NOT_AVAILABLE in TRANSIENT_ERRORS
    error = KafkaError(KafkaError._NOENT)
    assert kafka_error_of(KafkaException(error)) is error
    assert kafka_error_of(OrderedKafkaError("x", error)) is error


def test_retries_a_transient_error_then_returns() -> None:
    clock = FakeClock(100.0)
    calls, call = failing([transient(), transient()])
    policy = RetryPolicy(max_tries=5, delay=0.1, backoff=2.0, jitter=0.0)
    assert policy.call(call, sleep=clock.sleep, clock=clock) == "done"
    assert len(calls) == 3
    assert clock.slept == pytest.approx([0.1, 0.2])


def test_non_retriable_error_is_raised_at_once_with_its_kafka_error() -> None:
    clock = FakeClock(100.0)
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    original = OrderedKafkaError("refused", refused)
    calls, call = failing([original])
    with pytest.raises(OrderedKafkaError) as caught:
        RetryPolicy(max_tries=5).call(call, sleep=clock.sleep, clock=clock)
    assert caught.value is original and caught.value.kafka_error is refused
    assert len(calls) == 1 and clock.slept == []


def test_tries_are_bounded_and_the_last_error_is_raised_unchanged() -> None:
    clock = FakeClock(100.0)
    errors: list[BaseException] = [transient() for _ in range(10)]
    calls, call = failing(errors)
    with pytest.raises(OrderedKafkaError) as caught:
        RetryPolicy(max_tries=3).call(call, sleep=clock.sleep, clock=clock)
    assert len(calls) == 3 and len(clock.slept) == 2
    assert caught.value is errors[2]
    assert caught.value.kafka_error is not None
    assert caught.value.kafka_error.code() == KafkaError.LEADER_NOT_AVAILABLE


def test_deadline_bounds_the_time_and_the_last_pause() -> None:
    clock = FakeClock(100.0)
    calls, call = failing([transient() for _ in range(100)])
    policy = RetryPolicy(max_tries=None, deadline=1.0, delay=0.3, backoff=1.0, jitter=0.0)
    with pytest.raises(OrderedKafkaError):
        policy.call(call, sleep=clock.sleep, clock=clock)
    # pauses 0.3, 0.3, 0.3, then 0.1 to the deadline, one last try there, then raised
    assert clock.slept == pytest.approx([0.3, 0.3, 0.3, 0.1])
    assert len(calls) == 5
    assert clock.now == pytest.approx(101.0)


def test_interrupt_stops_retrying() -> None:
    clock = FakeClock(100.0)
    calls, call = failing([transient() for _ in range(10)])
    with pytest.raises(OrderedKafkaError):
        RetryPolicy(max_tries=None).call(
            call,
            sleep=clock.sleep,
            clock=clock,
            interrupt=lambda: len(calls) >= 2,
        )
    assert len(calls) == 2


def test_on_retry_sees_each_failure() -> None:
    clock = FakeClock(100.0)
    seen: list[tuple[int, float]] = []
    _calls, call = failing([transient(), transient()])
    RetryPolicy(delay=0.5, jitter=0.0).call(
        call,
        sleep=clock.sleep,
        clock=clock,
        on_retry=lambda _exc, attempt, pause: seen.append((attempt, pause)),
    )
    assert seen == [(1, 0.5), (2, 1.0)]


def test_pauses_grow_to_the_cap_and_jitter_stays_within_bounds() -> None:
    policy = RetryPolicy(delay=0.1, backoff=2.0, max_delay=1.0, jitter=0.25)
    pauses = policy.pauses(random.Random(7))
    drawn = [next(pauses) for _ in range(200)]
    bases = [min(1.0, 0.1 * 2.0**n) for n in range(200)]
    for pause, base in zip(drawn, bases, strict=True):
        assert base * 0.75 <= pause <= base
    assert max(drawn) <= 1.0
    assert len({round(p, 6) for p in drawn[10:]}) > 1  # jittered, not one fixed value
    flat = RetryPolicy(delay=0.1, backoff=2.0, max_delay=1.0, jitter=0.0).pauses()
    assert [next(flat) for _ in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tries": 0}, {"delay": -1.0}, {"backoff": 0.5}, {"jitter": 1.5}],
)
def test_nonsense_limits_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)

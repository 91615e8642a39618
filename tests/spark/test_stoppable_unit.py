"""The message :func:`spark_source.stoppable` hands Spark when a stop interrupts a batch.

Pure logic: fake Java throwables stand for py4j's ``JavaObject``. The text py4j sends
the JVM is built as py4j builds it (``traceback.format_exc()`` of the function's
error), and checked against Spark 4's pattern (``StreamExecution.PROXY_ERROR``): it
must match, and the part that Java's regex walks one recursion per character must be
short (Java overflowed at about 2,000 characters with the default 1 MB thread stack).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import pytest

from spark_source import BatchStoppedError, stoppable
from spark_source.stopping import INTERRUPTIONS, PY4J_PREFIX, stop_cause

# Spark 4.3's StreamExecution.PROXY_ERROR, as written there.
SPARK_PROXY_ERROR = re.compile(PY4J_PREFIX + r"((.|\r\n|\r|\n)*)(" + "|".join(INTERRUPTIONS) + ")")
# Bound on what follows the prefix (Java's regex recursion depth grows with it).
BOUND = 1000
JOB_GROUP = "3f1c2a4e-run-id"
STACK = "".join(f"\tat org.apache.spark.Frame{i}.call(Frame.scala:{i})\n" for i in range(150))


class Name:
    def __init__(self, name: str) -> None:
        self._name = name

    def getName(self) -> str:
        return self._name


class FakeThrowable:
    """What py4j's JavaObject answers for a java.lang.Throwable."""

    def __init__(self, cls: str, message: str | None = None, cause: Any = None) -> None:
        self._cls, self._message, self._cause = cls, message, cause

    def getClass(self) -> Name:
        return Name(self._cls)

    def getMessage(self) -> str | None:
        return self._message

    def getCause(self) -> Any:
        return self._cause

    def toString(self) -> str:
        return self._cls if self._message is None else f"{self._cls}: {self._message}"


class FakePy4JJavaError(Exception):
    """Like ``py4j.protocol.Py4JJavaError``: ``errmsg``, ``java_exception``, a long str."""

    def __init__(self, call: str, java_exception: FakeThrowable) -> None:
        super().__init__()
        self.errmsg = f"An error occurred while calling {call}.\n"
        self.java_exception = java_exception

    def __str__(self) -> str:
        return f"{self.errmsg}: {self.java_exception.toString()}\n{STACK}"


# Printed in a traceback as py4j's own class is.
FakePy4JJavaError.__module__ = "py4j.protocol"
FakePy4JJavaError.__qualname__ = "Py4JJavaError"


class FakeContext:
    def getLocalProperty(self, key: str) -> str | None:
        return JOB_GROUP if key == "spark.jobGroup.id" else None


class FakeSession:
    sparkContext = FakeContext()


class FakeFrame:
    sparkSession = FakeSession()


def py4j_message(func: Any) -> str:
    """What the JVM gets as the Py4JException's message when ``func`` raises."""
    try:
        func(FakeFrame(), 7)
    except Exception:
        return "An exception was raised by the Python Proxy. Return Message: " + (
            traceback.format_exc()
        )
    raise AssertionError("the function did not raise")


def raising(error: BaseException) -> Any:
    def func(frame: Any, batch_id: int) -> None:
        raise error

    return func


def after_prefix(message: str) -> str:
    return message[message.index(PY4J_PREFIX) + len(PY4J_PREFIX) :]


@pytest.mark.parametrize("cls", INTERRUPTIONS)
def test_an_interrupted_call_reaches_spark_short_and_recognised_as_a_stop(cls: str) -> None:
    error = FakePy4JJavaError("o124.count", FakeThrowable(cls))
    message = py4j_message(stoppable(raising(error)))
    assert SPARK_PROXY_ERROR.search(message) is not None, message
    assert len(after_prefix(message)) < BOUND, len(after_prefix(message))
    # No context: the original's stack is not in the traceback.
    assert STACK not in message and "During handling" not in message
    assert "BatchStoppedError" in message and "batch 7" in message and "o124.count" in message


def test_unwrapped_the_same_error_reaches_spark_thousands_of_characters_long() -> None:
    # The old behaviour, which overflowed Java's regex: this is what the wrapper bounds.
    error = FakePy4JJavaError("o124.count", FakeThrowable(INTERRUPTIONS[0]))
    message = py4j_message(raising(error))
    assert len(after_prefix(message)) > 2 * BOUND


def test_an_interruption_deeper_in_the_cause_chain_counts() -> None:
    inner = FakeThrowable("java.io.InterruptedIOException", "read interrupted")
    outer = FakeThrowable("org.apache.spark.SparkException", "Exception thrown", inner)
    error = FakePy4JJavaError("o9.collectToPython", outer)
    assert stop_cause(error, JOB_GROUP) == "java.io.InterruptedIOException"
    with pytest.raises(BatchStoppedError):
        stoppable(raising(error))(FakeFrame(), 1)


def test_a_job_cancelled_with_the_querys_job_group_counts_another_group_does_not() -> None:
    cancelled = f"Job 5 cancelled part of cancelled job group {JOB_GROUP}"
    ours = FakeThrowable("org.apache.spark.SparkException", cancelled)
    theirs = FakeThrowable(
        "org.apache.spark.SparkException", "Job 5 cancelled part of cancelled job group other"
    )
    message = py4j_message(stoppable(raising(FakePy4JJavaError("o1.count", ours))))
    assert SPARK_PROXY_ERROR.search(message) is not None
    assert len(after_prefix(message)) < BOUND
    error = FakePy4JJavaError("o1.count", theirs)
    with pytest.raises(FakePy4JJavaError) as info:
        stoppable(raising(error))(FakeFrame(), 1)
    assert info.value is error


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("crash injected in batch 3"),
        FakePy4JJavaError("o1.count", FakeThrowable("org.apache.spark.SparkException", "boom")),
    ],
)
def test_other_errors_go_through_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)) as info:
        stoppable(raising(error))(FakeFrame(), 3)
    assert info.value is error


def test_a_batch_that_returns_is_left_alone() -> None:
    seen: list[int] = []

    def func(frame: Any, batch_id: int) -> None:
        seen.append(batch_id)

    wrapped = stoppable(func)
    wrapped(FakeFrame(), 4)
    assert seen == [4] and wrapped.__name__ == "func"

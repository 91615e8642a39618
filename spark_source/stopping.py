"""A ``foreachBatch`` function that a ``query.stop()`` can interrupt without a dead thread's stack.

``query.stop()`` interrupts the stream execution thread and cancels the query's jobs. In
a classic PySpark session the ``foreachBatch`` function runs on that thread (py4j's
pinned threads), so a Spark call it is making fails with a ``Py4JJavaError`` whose
message is the whole Java stack of the ``InterruptedException``, about 8,000
characters. py4j hands the function's traceback to the JVM as the message of a
``py4j.Py4JException``, and Spark 4's ``StreamExecution.isInterruptionException``
(SPARK-48717) tells a stop from a failure by matching that message against::

    py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)
    (java.lang.InterruptedException|java.io.InterruptedIOException|...)

(one pattern, split here).

``java.util.regex`` recurses once per character for the repeated alternation group,
so on a message longer than about 2,000 characters after the prefix the stream thread
dies with ``java.lang.StackOverflowError`` (1,024 frames of ``java.util.regex.Pattern``
printed to the driver's stderr) instead of stopping cleanly.

:func:`stoppable` wraps a ``foreachBatch`` function: an error that the stop caused
(an interruption in the Java cause chain, or a job cancelled with the query's job
group) is raised again as :class:`BatchStoppedError`, whose message is one short line
that Spark's pattern recognises, without the original as context. Spark then records
the query as stopped; the batch is not committed and runs again on restart. Every
other error is raised unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from coordinator.kernel.errors import BatchStoppedError

__all__ = [
    "INTERRUPTIONS",
    "PY4J_PREFIX",
    "BatchStoppedError",
    "stop_cause",
    "stoppable",
    "stopped_message",
]

PY4J_PREFIX = "py4j.protocol.Py4JJavaError: An error occurred while calling"
"""Where Spark's pattern starts: what py4j prints before a failed Java call's target."""

INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""The Java classes Spark's pattern accepts as "interrupted by the stop"."""

# A cause chain deeper than this is not walked (Java allows cycles through getCause).
_MAX_CAUSES = 16
# How much of the original's first line the short message keeps.
_DETAIL_CHARS = 160


def _java_throwable(error: BaseException) -> Any:
    """The JVM throwable behind a py4j or pyspark error, else ``None``."""
    found = getattr(error, "java_exception", None)  # py4j.protocol.Py4JJavaError
    if found is None:
        found = getattr(error, "_origin", None)  # pyspark's CapturedException
    return found


def stop_cause(error: BaseException, job_group: str | None) -> str | None:
    """The Java class name that says ``error`` came from a stop, else ``None``.

    Args:
        error: What the ``foreachBatch`` function raised.
        job_group: The query's job group (its run id), which ``query.stop()`` cancels.

    Returns:
        The interruption class found in the Java cause chain, or
        ``java.lang.InterruptedException`` for a job cancelled with ``job_group``.
    """
    throwable = _java_throwable(error)
    for _ in range(_MAX_CAUSES):
        if throwable is None:
            return None
        name = str(throwable.getClass().getName())
        if name in INTERRUPTIONS:
            return name
        message = throwable.getMessage()
        if job_group and message is not None:
            text = str(message)
            if "cancelled" in text and job_group in text:
                return INTERRUPTIONS[0]
        throwable = throwable.getCause()
    return None


def _call_of(error: BaseException) -> str:
    """The failed Java call as py4j names it (``o124.count``), or ``a Spark method``."""
    errmsg = str(getattr(error, "errmsg", "") or "")
    call = errmsg.removeprefix("An error occurred while calling").strip().rstrip(".")
    return call or "a Spark method"


def _detail(error: BaseException) -> str:
    """The first line of the Java exception's ``toString`` (no stack), cut short."""
    throwable = _java_throwable(error)
    text = ""
    if throwable is not None:
        try:
            text = str(throwable.toString())
        except Exception:  # the JVM cannot be asked: the Python type will do
            text = ""
    line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return line[:_DETAIL_CHARS]


def stopped_message(error: BaseException, cause: str, batch_id: int) -> str:
    """The one-line message of :class:`BatchStoppedError` (Spark's pattern matches it).

    Args:
        error: What the ``foreachBatch`` function raised.
        cause: The interruption class (:func:`stop_cause`).
        batch_id: The batch that was running.
    """
    return (
        f"{PY4J_PREFIX} {_call_of(error)}: {cause}: query stopped during batch {batch_id} "
        f"({_detail(error)}); the batch was not committed and runs again on restart"
    )


def _job_group(frame: Any) -> str | None:
    try:
        group = frame.sparkSession.sparkContext.getLocalProperty("spark.jobGroup.id")
    except Exception:  # a Connect DataFrame has no SparkContext: no job group to compare
        return None
    return None if group is None else str(group)


def stoppable(func: Callable[[Any, int], Any]) -> Callable[[Any, int], None]:
    """Wrap a ``foreachBatch`` function so that ``query.stop()`` during a batch stops cleanly.

    Use it as ``writeStream.foreachBatch(stoppable(func))``. Errors the stop caused
    are raised again as a short :class:`BatchStoppedError` (nothing is swallowed: the
    batch stays uncommitted); every other error goes through unchanged.

    Args:
        func: ``func(frame, batch_id)``, as ``foreachBatch`` takes it.
    """

    @functools.wraps(func)
    def run(frame: Any, batch_id: int) -> None:
        try:
            func(frame, batch_id)
        except BatchStoppedError:
            raise
        except Exception as error:
            try:
                cause = stop_cause(error, _job_group(frame))
            except Exception:  # the JVM cannot be asked: leave the error as it was
                cause = None
            if cause is None:
                raise
            # No context: the traceback Spark matches must not carry the original.
            raise BatchStoppedError(stopped_message(error, cause, batch_id)) from None

    return run

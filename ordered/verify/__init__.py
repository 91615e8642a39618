"""Verifiable clients and their checker: proof of per-key order from recorded histories.

In the manner of Kafka's VerifiableProducer/VerifiableConsumer and Jepsen's Kafka
workload: :class:`VerifiableProducer` writes numbered records (producer id, key,
sequence) and records every ack; :class:`VerifiableReader` is an ``OrderedConsumer``
group member that records every delivery with its partition, offset and epoch; both
append JSON lines to their own history files (:mod:`ordered.verify.history`), so they
can run as separate processes and be killed at any moment. :func:`check` reads the
histories and reports order violations (first deliveries and every pass), lost acked
records and duplicates (:mod:`ordered.verify.checker`).
"""

from __future__ import annotations

from ordered.verify.checker import Delivery, PauseProof, Verdict, Violation, check
from ordered.verify.history import HistoryWriter, now_ns, read_events
from ordered.verify.producer import VerifiableProducer, decode_value, encode_value
from ordered.verify.reader import VerifiableReader

__all__ = [
    "Delivery",
    "HistoryWriter",
    "PauseProof",
    "Verdict",
    "VerifiableProducer",
    "VerifiableReader",
    "Violation",
    "check",
    "decode_value",
    "encode_value",
    "now_ns",
    "read_events",
]

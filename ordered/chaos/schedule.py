"""The seeded fault schedule of ``ordered chaos``: the same seed gives the same schedule.

The schedule is made in full before the run starts, from ``random.Random(seed)`` and
the run's shape only (duration, broker count, which optional kinds are on), so two runs
with the same arguments inject the same faults at the same times against the same
targets. What a fault then finds (a layout change refused because another is still
pending, say) is the run's business, and is logged.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

__all__ = ["FaultKind", "ScheduleShape", "ScheduledFault", "digest", "make_schedule"]


class FaultKind(Enum):
    """Every fault ``ordered chaos`` injects, with what it does (``describe``)."""

    EXPAND = "expand"
    SHRINK = "shrink"
    DEEP_CHAIN = "deep-chain"
    REGROW_RETIRED = "regrow-retired"
    TRIM = "trim"
    RETENTION_SWEEP = "retention-sweep"
    KILL_PRODUCER = "kill-producer"
    KILL_CONSUMER = "kill-consumer"
    KILL_COORDINATOR = "kill-coordinator"
    STOP_PRODUCER = "stop-producer"
    STOP_CONSUMER = "stop-consumer"
    STOP_COORDINATOR = "stop-coordinator"
    BROKER_RESTART = "broker-restart"
    ZOOKEEPER_RESTART = "zookeeper-restart"
    EXPIRE_PRODUCER_SESSION = "expire-producer-session"
    EXPIRE_CONSUMER_SESSION = "expire-consumer-session"
    REBALANCE = "rebalance"
    PAUSE_GROUP = "pause-group"
    SEEK_BACK = "seek-back"
    OFFSET_RESET = "offset-reset"
    KILL_PIPELINE = "kill-pipeline"
    KILL_SPARK_EXECUTOR = "kill-spark-executor"
    KILL_SPARK_DRIVER = "kill-spark-driver"
    KILL_ZOOKEEPER_MEMBER = "kill-zookeeper-member"
    ZOOKEEPER_QUORUM_LOSS = "zookeeper-quorum-loss"
    KAFKA_CUT = "kafka-cut"
    KAFKA_BLACKHOLE = "kafka-blackhole"
    KAFKA_LATENCY = "kafka-latency"
    ZOOKEEPER_CUT = "zookeeper-cut"
    ZOOKEEPER_BLACKHOLE = "zookeeper-blackhole"
    ZOOKEEPER_LATENCY = "zookeeper-latency"

    @property
    def describe(self) -> str:
        """One line on what the fault does."""
        return _DESCRIPTIONS[self]

    @property
    def layout(self) -> bool:
        """Whether the fault changes the topic's layout."""
        return self in (
            FaultKind.EXPAND,
            FaultKind.SHRINK,
            FaultKind.DEEP_CHAIN,
            FaultKind.REGROW_RETIRED,
        )


_DESCRIPTIONS = {
    FaultKind.EXPAND: "grow the topic by 1-2 partitions (`ordered expand`)",
    FaultKind.SHRINK: "shrink the topic by 1-2 partitions, never below initial (`ordered shrink`)",
    FaultKind.DEEP_CHAIN: "stop the lagging group, run 3-4 layout changes in a row, continue it: "
    "it then reads through a deep graph of epochs",
    FaultKind.REGROW_RETIRED: "with the lagging group stopped, shrink and at once expand again: "
    "the expansion re-activates retired partitions that still hold unconsumed records",
    FaultKind.TRIM: "`ordered trim TOPIC --consumed`: DeleteRecords to the minimum committed "
    "offset of the interested groups",
    FaultKind.RETENTION_SWEEP: "turn on consumed retention (`ordered retention --consumed-ms`): "
    "the coordinators' sweep trims consumed records every few seconds",
    FaultKind.KILL_PRODUCER: "SIGKILL a producer process, start a new one (new producer id) later",
    FaultKind.KILL_CONSUMER: "SIGKILL a consumer process, start a new member of its group later",
    FaultKind.KILL_COORDINATOR: "SIGKILL a coordinator daemon, start it again later",
    FaultKind.STOP_PRODUCER: "SIGSTOP a producer, SIGCONT it 2-15 s later",
    FaultKind.STOP_CONSUMER: "SIGSTOP a consumer, SIGCONT it 2-15 s later (its group rebalances "
    "without it after 6 s; it comes back as a zombie first)",
    FaultKind.STOP_COORDINATOR: "SIGSTOP a coordinator daemon, SIGCONT it 2-15 s later",
    FaultKind.BROKER_RESTART: "stop one Kafka broker (SIGTERM, SIGKILL after 10 s), start it "
    "again 2-10 s later (three brokers, replication factor 3)",
    FaultKind.ZOOKEEPER_RESTART: "SIGKILL ZooKeeper (every member of an ensemble), start it "
    "again 1-4 s later",
    FaultKind.EXPIRE_PRODUCER_SESSION: "expire a producer's ZooKeeper session (a second "
    "connection with its session id and password, closed)",
    FaultKind.EXPIRE_CONSUMER_SESSION: "expire a consumer's ZooKeeper session the same way",
    FaultKind.REBALANCE: "add a member to the main group, or let one leave cleanly",
    FaultKind.PAUSE_GROUP: "SIGSTOP every member of the lagging group for 20-60 s: layout "
    "changes and trims go on while it holds records back",
    FaultKind.SEEK_BACK: "the replaying group's member seeks every partition back to its log "
    "start while running (a replay pass)",
    FaultKind.OFFSET_RESET: "stop the replaying group, reset its committed offsets to the log "
    "start (AdminClient), start it again (a replay pass)",
    FaultKind.KILL_PIPELINE: "SIGKILL the exactly-once stage (mid-transaction as a rule); a new "
    "process with the same transactional.id replaces it 1-5 s later",
    FaultKind.KILL_SPARK_EXECUTOR: "SIGKILL an executor JVM on a Spark worker: Spark runs its "
    "tasks again; the master starts a new executor",
    FaultKind.KILL_SPARK_DRIVER: "SIGKILL the Spark driver; a new driver restarts the query "
    "from its checkpoint 2-10 s later",
    FaultKind.KILL_ZOOKEEPER_MEMBER: "SIGKILL one member of the ZooKeeper ensemble (the leader "
    "half the time), start it again 2-15 s later: the others keep the quorum",
    FaultKind.ZOOKEEPER_QUORUM_LOSS: "SIGKILL a majority of the ZooKeeper ensemble (2 of 3), "
    "start them again 5-20 s later: no quorum, every ZooKeeper session suspended meanwhile",
    FaultKind.KAFKA_CUT: "(network) reset every client connection to one broker and refuse "
    "new ones for 2-20 s (its proxy; inter-broker traffic stays)",
    FaultKind.KAFKA_BLACKHOLE: "(network) hold every client connection to one broker, moving no "
    "byte either way, for 2-20 s",
    FaultKind.KAFKA_LATENCY: "(network) 50-500 ms more each way between the clients and one "
    "broker for 2-20 s",
    FaultKind.ZOOKEEPER_CUT: "(network) reset one process's ZooKeeper connections and refuse new "
    "ones for 2-20 s (its own proxy: the others keep theirs)",
    FaultKind.ZOOKEEPER_BLACKHOLE: "(network) hold one process's ZooKeeper connections, moving no "
    "byte, for 2-20 s",
    FaultKind.ZOOKEEPER_LATENCY: "(network) 50-500 ms more each way between one process and "
    "ZooKeeper for 2-20 s",
}


@dataclass(frozen=True)
class ScheduleShape:
    """What a schedule depends on besides the seed.

    Attributes:
        duration: Seconds of faults (the run drains after them).
        brokers: 1 or 3; broker restarts only with 3.
        replays: Whether seeks backwards and offset resets are scheduled.
        eos: Whether the exactly-once stage runs (and is killed).
        producers: Producer slots.
        consumers: Members of the main group at the start.
        coordinators: Coordinator daemons.
        initial: The topic's initial partition count.
        max_partitions: The largest partition count an expansion may reach.
        spark: Whether a Spark query reads the topic (its executors and driver are killed).
        zookeepers: ZooKeeper servers (1, or an ensemble of 3 or 5); member kills and
            quorum losses only with an ensemble.
        network: Whether the network fault kinds (proxies between the clients and
            Kafka, and between each process and ZooKeeper) are scheduled.
    """

    duration: float
    brokers: int = 1
    replays: bool = False
    eos: bool = False
    producers: int = 3
    consumers: int = 3
    coordinators: int = 2
    initial: int = 2
    max_partitions: int = 8
    spark: bool = False
    zookeepers: int = 1
    network: bool = False


@dataclass(frozen=True)
class ScheduledFault:
    """One fault: when (seconds after the start), what, against which target, how.

    Attributes:
        at: Seconds after traffic started.
        kind: The :class:`FaultKind`.
        target: The process slot (``producer-1``...), or empty for the cluster or topic.
        params: Kind-specific numbers (``steps``, ``down_s``, ``to``...).
    """

    at: float
    kind: FaultKind
    target: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fault as a JSON-ready dict."""
        data = asdict(self)
        data["kind"] = self.kind.value
        return data


_WEIGHTS = {
    FaultKind.EXPAND: 6,
    FaultKind.SHRINK: 5,
    FaultKind.DEEP_CHAIN: 1,
    FaultKind.REGROW_RETIRED: 1,
    FaultKind.TRIM: 2,
    FaultKind.RETENTION_SWEEP: 1,
    FaultKind.KILL_PRODUCER: 4,
    FaultKind.KILL_CONSUMER: 4,
    FaultKind.KILL_COORDINATOR: 3,
    FaultKind.STOP_PRODUCER: 2,
    FaultKind.STOP_CONSUMER: 2,
    FaultKind.STOP_COORDINATOR: 1,
    FaultKind.BROKER_RESTART: 1,
    FaultKind.ZOOKEEPER_RESTART: 1,
    FaultKind.EXPIRE_PRODUCER_SESSION: 2,
    FaultKind.EXPIRE_CONSUMER_SESSION: 2,
    FaultKind.REBALANCE: 2,
    FaultKind.PAUSE_GROUP: 1,
    FaultKind.SEEK_BACK: 2,
    FaultKind.OFFSET_RESET: 1,
    FaultKind.KILL_PIPELINE: 3,
    FaultKind.KILL_SPARK_EXECUTOR: 2,
    FaultKind.KILL_SPARK_DRIVER: 2,
    FaultKind.KILL_ZOOKEEPER_MEMBER: 2,
    FaultKind.ZOOKEEPER_QUORUM_LOSS: 1,
    FaultKind.KAFKA_CUT: 1,
    FaultKind.KAFKA_BLACKHOLE: 1,
    FaultKind.KAFKA_LATENCY: 1,
    FaultKind.ZOOKEEPER_CUT: 2,
    FaultKind.ZOOKEEPER_BLACKHOLE: 1,
    FaultKind.ZOOKEEPER_LATENCY: 1,
}

_NETWORK = (
    FaultKind.KAFKA_CUT,
    FaultKind.KAFKA_BLACKHOLE,
    FaultKind.KAFKA_LATENCY,
    FaultKind.ZOOKEEPER_CUT,
    FaultKind.ZOOKEEPER_BLACKHOLE,
    FaultKind.ZOOKEEPER_LATENCY,
)


def kinds_for(shape: ScheduleShape) -> list[FaultKind]:
    """The fault kinds a run of ``shape`` injects."""
    kinds = list(FaultKind)
    if shape.brokers < 3:
        kinds.remove(FaultKind.BROKER_RESTART)
    if not shape.replays:
        kinds.remove(FaultKind.SEEK_BACK)
        kinds.remove(FaultKind.OFFSET_RESET)
    if not shape.eos:
        kinds.remove(FaultKind.KILL_PIPELINE)
    if not shape.spark:
        kinds.remove(FaultKind.KILL_SPARK_EXECUTOR)
        kinds.remove(FaultKind.KILL_SPARK_DRIVER)
    if shape.zookeepers < 3:
        kinds.remove(FaultKind.KILL_ZOOKEEPER_MEMBER)
        kinds.remove(FaultKind.ZOOKEEPER_QUORUM_LOSS)
    if not shape.network:
        kinds = [k for k in kinds if k not in _NETWORK]
    return kinds


def _params(
    kind: FaultKind, rnd: random.Random, shape: ScheduleShape
) -> tuple[str, dict[str, Any]]:
    if kind in (FaultKind.EXPAND, FaultKind.SHRINK):
        return "", {"steps": rnd.choice([1, 1, 2])}
    if kind is FaultKind.DEEP_CHAIN:
        return "", {"changes": [rnd.choice(["expand", "shrink"]) for _ in range(rnd.randint(3, 4))]}
    if kind is FaultKind.REGROW_RETIRED:
        return "", {"steps": rnd.choice([1, 2])}
    if kind in (FaultKind.KILL_PRODUCER, FaultKind.STOP_PRODUCER):
        slot = f"producer-{rnd.randrange(shape.producers)}"
        return slot, {"down_s": round(rnd.uniform(2, 15), 1)}
    if kind is FaultKind.EXPIRE_PRODUCER_SESSION:
        return f"producer-{rnd.randrange(shape.producers)}", {}
    if kind in (FaultKind.KILL_CONSUMER, FaultKind.STOP_CONSUMER):
        slot = f"main-{rnd.randrange(shape.consumers)}"
        return slot, {"down_s": round(rnd.uniform(2, 15), 1)}
    if kind is FaultKind.EXPIRE_CONSUMER_SESSION:
        group = rnd.choice(["main", "main", "lag", "replay"])
        index = rnd.randrange(shape.consumers) if group == "main" else 0
        return f"{group}-{index}", {}
    if kind in (FaultKind.KILL_COORDINATOR, FaultKind.STOP_COORDINATOR):
        slot = f"coordinator-{rnd.randrange(shape.coordinators)}"
        return slot, {"down_s": round(rnd.uniform(2, 15), 1)}
    if kind is FaultKind.BROKER_RESTART:
        return f"broker-{rnd.randint(1, shape.brokers)}", {"down_s": round(rnd.uniform(2, 10), 1)}
    if kind is FaultKind.ZOOKEEPER_RESTART:
        return "zookeeper", {"down_s": round(rnd.uniform(1, 4), 1)}
    if kind is FaultKind.REBALANCE:
        return "main", {"join": rnd.random() < 0.5}
    if kind is FaultKind.PAUSE_GROUP:
        return "lag", {"down_s": round(rnd.uniform(20, 60), 1)}
    if kind in (FaultKind.SEEK_BACK, FaultKind.OFFSET_RESET):
        return "replay", {}
    if kind is FaultKind.KILL_PIPELINE:
        return "eos-0", {"down_s": round(rnd.uniform(1, 5), 1)}
    if kind is FaultKind.KILL_SPARK_EXECUTOR:
        return f"worker-{rnd.randrange(2)}", {}
    if kind is FaultKind.KILL_SPARK_DRIVER:
        return "spark-0", {"down_s": round(rnd.uniform(2, 10), 1)}
    if kind is FaultKind.KILL_ZOOKEEPER_MEMBER:
        member = "leader" if rnd.random() < 0.5 else f"zookeeper-{rnd.randint(1, shape.zookeepers)}"
        return member, {"down_s": round(rnd.uniform(2, 15), 1)}
    if kind is FaultKind.ZOOKEEPER_QUORUM_LOSS:
        members = sorted(rnd.sample(range(1, shape.zookeepers + 1), shape.zookeepers // 2 + 1))
        return ",".join(f"zookeeper-{m}" for m in members), {"down_s": round(rnd.uniform(5, 20), 1)}
    if kind in _NETWORK:
        return _network_params(kind, rnd, shape)
    return "", {}


def _network_params(
    kind: FaultKind, rnd: random.Random, shape: ScheduleShape
) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {"down_s": round(rnd.uniform(2, 20), 1)}
    if kind in (FaultKind.KAFKA_LATENCY, FaultKind.ZOOKEEPER_LATENCY):
        params["latency_ms"] = rnd.randint(50, 500)
    if kind.value.startswith("kafka-"):
        return f"broker-{rnd.randint(1, shape.brokers)}", params
    # A ZooKeeper fault hits one process: a coordinator most often (leadership moves).
    role = rnd.choice(["coordinator", "coordinator", "producer", "main"])
    count = {"coordinator": shape.coordinators, "producer": shape.producers}
    return f"{role}-{rnd.randrange(count.get(role, shape.consumers))}", params


def make_schedule(seed: int, shape: ScheduleShape) -> list[ScheduledFault]:
    """The faults of a run: every kind at least once when there is room, then at random.

    Faults come every ``duration / count`` seconds on average (jittered), starting after
    a few seconds of traffic and ending before the last tenth of the run, so the last
    fault's effects are over before the drain. The first faults cover every kind once
    (in a seeded order); the rest are drawn by weight.
    """
    rnd = random.Random(seed)
    kinds = kinds_for(shape)
    start, end = min(10.0, shape.duration * 0.05), shape.duration * 0.9
    count = max(len(kinds), int((end - start) / 6.0))
    if shape.duration >= 600:
        count = int((end - start) / 10.0)  # long runs: a fault every 10 s on average
    gap = (end - start) / count
    order = kinds[:]
    rnd.shuffle(order)
    weights = [_WEIGHTS[k] for k in kinds]
    out = []
    for i in range(count):
        kind = order[i] if i < len(order) else rnd.choices(kinds, weights)[0]
        at = round(start + gap * i + rnd.uniform(0, gap * 0.5), 2)
        target, params = _params(kind, rnd, shape)
        out.append(ScheduledFault(at, kind, target, params))
    return out


def digest(schedule: list[ScheduledFault]) -> str:
    """A short hash of a schedule (equal schedules, equal digests)."""
    text = json.dumps([f.to_dict() for f in schedule], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

"""The rows of ``ordered bench``'s table, read from each benchmark's JSON.

One extractor per benchmark turns its JSON into rows (figure, value, baseline, ratio,
spread, goal); :func:`summarise` collects them in the table's order and
:func:`render_markdown` prints the README's performance table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ordered.cli.bench_aio import aio_rows
from ordered.cli.bench_calls import calls_rows
from ordered.cli.bench_spark_jvm import spark_jvm_rows

__all__ = ["render_markdown", "render_text", "summarise"]


# --- reading the results ------------------------------------------------------------


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _row(
    figure: str,
    value: Any,
    baseline: Any = None,
    ratio: Any = None,
    spread: Any = None,
    goal: str = "report",
    source: str = "",
) -> dict[str, Any]:
    return {
        "figure": figure,
        "value": value,
        "baseline": baseline,
        "ratio": ratio,
        "spread": spread,
        "goal": goal,
        "source": source,
    }


def _linear_hash(d: dict[str, Any]) -> list[dict[str, Any]]:
    b = _get(d, "results", "bytes") or {}
    return [
        _row(
            "`Layout.partition_for`, bytes keys (ns/key)",
            b.get("layout_ns"),
            f"bare `mmh3 % n` {b.get('bare_ns')}",
            b.get("layout_ratio"),
            None,
            "<= 2x",
            "linear_hash",
        )
    ]


def _producer(d: dict[str, Any]) -> list[dict[str, Any]]:
    h = _get(d, "headline") or {}
    cost = _get(d, "client_cost_no_broker") or {}
    lat = _get(d, "latency") or {}
    seal = _get(d, "seal_with_10_producers") or {}

    def spread(s: Any) -> str | None:
        return (
            None
            if not s
            else f"quartiles {s.get('q1')}-{s.get('q3')} over {len(s.get('rounds', []))}"
        )

    dvp = h.get("default_vs_plain") or {}
    hvp = h.get("header_on_vs_plain") or {}
    return [
        _row(
            "OrderedProducer, default configuration, end to end (records/s)",
            "paired rounds",
            f"plain median {h.get('plain_per_s_median')}/s",
            dvp.get("median"),
            spread(dvp),
            ">= 0.9",
            "producer",
        ),
        _row(
            "... opt-in epoch header, end to end",
            "paired rounds",
            "plain",
            hvp.get("median"),
            spread(hvp),
            "report",
            "producer",
        ),
        _row(
            "... client-side cost without a broker (ns/record)",
            _get(cost, "ordered_default", "ns_per_record"),
            f"plain {_get(cost, 'plain', 'ns_per_record')}",
            _get(cost, "ordered_default", "ratio_vs_plain"),
            None,
            "report",
            "producer",
        ),
        _row(
            "... produce p99 during an expansion vs steady (ms)",
            _get(lat, "ordered", "during_expansion", "p99_ms"),
            f"steady {_get(lat, 'ordered', 'steady', 'p99_ms')}",
            None,
            f"plain beside it {_get(lat, 'plain', 'steady', 'p99_ms')} / "
            f"{_get(lat, 'plain', 'during_expansion', 'p99_ms')}",
            "report",
            "producer",
        ),
        _row(
            "expand -> sealed, 10 producers, median (s)",
            seal.get("median_s"),
            None,
            None,
            f"max {seal.get('max_s')} over {len(seal.get('runs', []))}",
            "< 1 s",
            "producer",
        ),
    ]


def _consumer(d: dict[str, Any]) -> list[dict[str, Any]]:
    t = _get(d, "throughput") or {}
    r = _get(d, "default_ratio_vs_plain") or {}
    svc = _get(d, "unblock_latency_position_service") or {}
    fb = _get(d, "unblock_latency_fallback") or {}
    rows = [
        _row(
            "OrderedConsumer, default configuration (records/s)",
            _get(t, "ordered_default", "median_per_s"),
            f"plain {_get(t, 'plain', 'median_per_s')}",
            r.get("median"),
            f"range {r.get('range')}",
            ">= 0.9",
            "consumer",
        )
    ]
    for name, label in (
        ("ordered_header_audit_every_16", "... header audit 1 in 16"),
        ("ordered_key_audit_every_record", "... key audit on every record"),
        ("ordered_full_audit", "... full audit"),
    ):
        rows.append(
            _row(
                label,
                _get(t, name, "median_per_s"),
                "plain",
                _get(t, name, "ratio_median_vs_plain"),
                None,
                "report",
                "consumer",
            )
        )
    rows.append(
        _row(
            "gate unblock p50 / p99, position service (ms)",
            f"{svc.get('p50_ms')} / {svc.get('p99_ms')}",
            f"fallback poll {fb.get('p50_ms')} / {fb.get('p99_ms')}",
            None,
            f"{svc.get('samples')} samples",
            "<= 100 ms",
            "consumer",
        )
    )
    return rows


SPARK_SOURCE_MIN_RECORDS: Final = 1_000_000
"""The smallest read whose Python-source figures go into the table.

Smaller reads (``bench_spark.py``'s 400k, 100k in ``--quick``) gave ratios that reads of
1M and 3M records do not bear out (1.17x at 100k, 0.33x-0.74x at 1M and 3M): the table
takes the source's figures from ``bench_spark_jvm.py``'s 1M and 3M reads instead, and
from a ``bench_spark.py --records`` run of at least this size.
"""


def _records(n: int) -> str:
    return f"{n / 1_000_000:g}M" if n >= 1_000_000 else f"{n / 1000:g}k"


def _spark(d: dict[str, Any]) -> list[dict[str, Any]]:
    records = d.get("records")
    if isinstance(records, int) and records >= SPARK_SOURCE_MIN_RECORDS:
        rows = _spark_source(d, records)
    else:
        rows = []
    return [*rows, *_spark_sink(d)]


def _paired(d: dict[str, Any], name: str) -> tuple[Any, str | None]:
    # Paired rounds: {"median", "min", "max", "rounds"}; older files: one median.
    paired = _get(d, f"{name}_ratio")
    if isinstance(paired, dict):
        return paired.get("median"), (
            f"rounds {paired.get('rounds')} (min {paired.get('min')}, max {paired.get('max')})"
        )
    return _get(d, f"{name}_ratio_median"), None


def _spark_source(d: dict[str, Any], records: int) -> list[dict[str, Any]]:
    src = _get(d, "source_rows_per_s") or {}
    steady = _get(d, "source_steady_rows_per_s") or {}
    startup = _get(d, "source_startup_s") or {}
    source_ratio, source_spread = _paired(d, "source")
    rows = [
        _row(
            f"Spark source, `ordered-kafka`, {_records(records)} records, end to end with "
            "query start-up (rows/s)",
            _get(src, "ordered-kafka", "median"),
            f"Spark's Kafka source {_get(src, 'kafka', 'median')}",
            source_ratio,
            source_spread,
            ">= 0.9",
            "spark",
        )
    ]
    steady_ratio, steady_spread = _paired(d, "source_steady")
    if steady_ratio is not None:
        rows.append(
            _row(
                "... steady state: inside micro-batches only (rows/s)",
                _get(steady, "ordered-kafka", "median"),
                f"Spark's Kafka source {_get(steady, 'kafka', 'median')}",
                steady_ratio,
                steady_spread,
                "report",
                "spark",
            )
        )
    if startup:
        rows.append(
            _row(
                "... start-up per query, outside micro-batches, median (s)",
                _get(startup, "ordered-kafka", "median"),
                f"Spark's Kafka source {_get(startup, 'kafka', 'median')}",
                None,
                f"rounds {_get(startup, 'ordered-kafka', 'rounds')} vs "
                f"{_get(startup, 'kafka', 'rounds')}",
                "report",
                "spark",
            )
        )
    return rows


def _spark_sink(d: dict[str, Any]) -> list[dict[str, Any]]:
    sink = _get(d, "sink_rows_per_s") or {}
    plan = _get(d, "planning_ms_direct") or {}
    sink_ratio, sink_spread = _paired(d, "sink")
    return [
        _row(
            "Spark sink, `ordered-kafka` (rows/s)",
            _get(sink, "ordered-kafka", "median"),
            f"Spark's Kafka sink {_get(sink, 'kafka', 'median')}",
            sink_ratio,
            sink_spread,
            ">= 0.9",
            "spark",
        ),
        _row(
            "Spark planning per micro-batch, p95 (ms)",
            plan.get("p95_ms"),
            None,
            None,
            f"median {plan.get('median_ms')}, max {plan.get('max_ms')}",
            "<= 50 ms",
            "spark",
        ),
    ]


def _backlog_ratios(rows: list[dict[str, Any]]) -> str:
    """The backlog rows' ratios to plain, by batch size and fetch backoff."""
    parts = [
        f"{r['mode'].removeprefix('backlog, ')} "
        f"{r.get('ratio_median_of_rounds', r['ratio_vs_plain'])}"
        + (
            f" (CPU per record {r['cpu_ratio_median_of_rounds']})"
            if "cpu_ratio_median_of_rounds" in r
            else ""
        )
        + (
            f", in lockstep {r['lockstep_ratio_median_of_rounds']} "
            f"(CPU per record {r['lockstep_cpu_ratio_median_of_rounds']})"
            if "lockstep_ratio_median_of_rounds" in r
            else ""
        )
        for r in rows
        if r.get("mode", "").startswith("backlog") and "ratio_vs_plain" in r
    ]
    return f"ratio (median of rounds) {'; '.join(parts)}; " if parts else ""


def _load(d: dict[str, Any]) -> str:
    """``; load L`` when the figure came with the machine's 1-minute load average."""
    load = d.get("load_average")
    return f"; load {load[0]}" if load else ""


def _scale(d: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for b in _get(d, "barrier") or []:
        rows.append(
            _row(
                f"barrier: expand -> sealed, {b['producers']} producer processes, median (s)",
                b["median_s"],
                None,
                None,
                f"max {b['max_s']} over {b['rounds']}" + _load(b),
                "<= 1 s at 50" if b["producers"] == 50 else "report",
                "scale",
            )
        )
    c = _get(d, "coordinator")
    if c:
        rows.append(
            _row(
                f"coordinator: relay p99, {c['topics']} topics, {c['groups_waiting']} groups "
                "waiting (ms)",
                c["relay_p99_ms"],
                None,
                None,
                f"p50 {c['relay_p50_ms']}, max {c['relay_max_ms']} over "
                f"{c.get('relay_samples', '?')}"
                + (
                    f"; one full round p50 {c['relay_round_p50_ms']}, p99 "
                    f"{c['relay_round_p99_ms']} ms"
                    if "relay_round_p99_ms" in c
                    else ""
                )
                + f"; daemon CPU {c['daemon_cpu_relaying']} (idle {c['daemon_cpu_idle']}); "
                f"ZooKeeper {c['zookeeper_requests_per_s_relaying']} req/s (idle "
                f"{c['zookeeper_requests_per_s_idle']})" + _load(c),
                "<= 50 ms",
                "scale",
            )
        )
    z = _get(d, "zookeeper_load")
    if z:
        rows.append(
            _row(
                "ZooKeeper requests/s per consumer at full speed",
                z["zookeeper_requests_per_s_full_speed"],
                f"one server answers {z['zookeeper_server_requests_per_s']}/s",
                z["ratio_vs_plain"],
                (
                    "ratio: the largest batches, 10 ms for both, read in lockstep; "
                    if z.get("ratio_method") == "lockstep"
                    else ""
                )
                + f"idle {z['zookeeper_requests_per_s_idle']}/s"
                + (
                    f" (the consumer's own {z['zookeeper_requests_per_s_idle_consumer']}/s)"
                    if "zookeeper_requests_per_s_idle_consumer" in z
                    else ""
                )
                + "; consumer at "
                f"{z['full_speed_records_per_s']} records/s (plain {z['plain_records_per_s']}); "
                + _backlog_ratios(z.get("rows", []))
                + f"~{z['consumers_per_3_node_ensemble_at_full_speed']} consumers per 3-node "
                "ensemble"
                + (
                    f"; a producer {z['producer']['zookeeper_requests_per_s']}/s at full speed, "
                    f"{z['producer']['zookeeper_requests_per_s_idle']}/s idle, "
                    f"~{z['producers_per_3_node_ensemble']} producers per ensemble"
                    if "producer" in z
                    else ""
                )
                + _load(z),
                "<= 2 req/s, the consumer's own idle <= 0.2, ratio >= 0.9",
                "scale",
            )
        )
    g = _get(d, "gate_wait")
    if g:
        gated = [r["child_gated_s"] for r in g]
        drained = [r["source_drained_s"] for r in g]
        wait, source = sorted(gated)[len(gated) // 2], sorted(drained)[len(drained) // 2]
        rows.append(
            _row(
                "gate wait of a new partition under a lagging consumer (s)",
                round(wait, 3),
                f"source's tail delivered {round(source, 3)} s",
                round(wait / max(source, 1e-9), 3),
                f"rounds {gated} vs {drained}",
                "report",
                "scale",
            )
        )
    p = _get(d, "partitions")
    if p:
        steps = ", ".join(f"{s['to']}: {s['seconds']} s" for s in p["steps"])
        gates = ", ".join(f"{g['partitions']}: {g['gate_ns_per_record']}" for g in p["gate"])
        rows.append(
            _row(
                "expand under traffic, seconds per step (to partitions)",
                steps,
                None,
                None,
                f"gate rule ns/record by partitions {gates}",
                "report",
                "scale",
            )
        )
        rows.append(
            _row(
                f"layout history in ZooKeeper after {p['history_epochs']} epochs (bytes)",
                p["history_bytes"],
                None,
                None,
                f"{p['history_znodes']} znodes"
                + (
                    f"; read in {p['history_load_ms']} ms"
                    + (
                        f", {p['history_reload_ms']} ms after one more change"
                        if "history_reload_ms" in p
                        else ""
                    )
                    + "; gate rule "
                    f"{p['history_gate_ns_per_record']} ns/record on it"
                    if "history_load_ms" in p
                    else ""
                ),
                "report",
                "scale",
            )
        )
        c = p.get("history_compaction")
        if c:
            rows.append(
                _row(
                    "layout history after compaction, every partition trimmed (bytes)",
                    c["bytes_after"],
                    p["history_bytes"],
                    None,
                    f"{c['epochs_after']} epoch(s), {c['znodes_after']} znodes, read in "
                    f"{c['load_ms_after']} ms; {c['dropped']} epochs dropped in "
                    f"{c['compact_ms']} ms ({c['dropped_before_trim']} before the trim)",
                    "report",
                    "scale",
                )
            )
    return rows


def _jvm_load(d: dict[str, Any]) -> str:
    loads = _get(d, "load_average_1m", "per_round") or []
    return f"; load {min(loads):.2f}-{max(loads):.2f}" if loads else ""


def _jvm(d: dict[str, Any]) -> list[dict[str, Any]]:
    rates = _get(d, "records_per_s") or {}
    ratio = _get(d, "ratio") or {}
    cpu = _get(d, "cpu_ratio", "median")
    return [
        _row(
            "Java KafkaProducer with OrderedPartitioner + interceptor, keyed 100 B (records/s)",
            _get(rates, "ordered", "median"),
            f"plain KafkaProducer {_get(rates, 'plain', 'median')}",
            ratio.get("median"),
            f"quartiles {ratio.get('q1')}-{ratio.get('q3')} (min {ratio.get('min')}, max "
            f"{ratio.get('max')}) over {d.get('rounds')} rounds{_jvm_load(d)}",
            ">= 0.95",
            "jvm",
        ),
        _row(
            "... CPU per record over the timed records, whole JVM (us)",
            _get(d, "cpu_us_per_record", "ordered", "median"),
            f"plain {_get(d, 'cpu_us_per_record', 'plain', 'median')}",
            round(1 / cpu, 3) if isinstance(cpu, int | float) and cpu else None,
            "ratio: plain/ordered CPU per record, median of rounds (the plugins' cost, "
            "read apart from the machine's other load)",
            "report",
            "jvm",
        ),
    ]


def _jvm_consumer(d: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    names = {
        "steady": "Java OrderedKafkaConsumer, keyed 100 B backlog, no layout change (records/s)",
        "expansion": "... through an expansion 2 -> 4, timed from subscribe() (records/s)",
    }
    for workload, figure in names.items():
        w = _get(d, workload) or {}
        rates = w.get("records_per_s") or {}
        ratio = w.get("ratio") or {}
        rows.append(
            _row(
                figure,
                _get(rates, "ordered", "median"),
                f"KafkaConsumer {_get(rates, 'kafka', 'median')}",
                ratio.get("median"),
                f"quartiles {ratio.get('q1')}-{ratio.get('q3')} (min {ratio.get('min')}, max "
                f"{ratio.get('max')}) over {d.get('rounds')} rounds of {d.get('records')} "
                f"records{_jvm_load(d)}",
                _get(d, "goals", workload),
                "jvm_consumer",
            )
        )
    late = _get(d, "expansion", "ratio_from_first_record")
    if isinstance(late, dict):
        rows.append(
            _row(
                "... the same reads timed from the first record (no join, no first reads)",
                None,
                "KafkaConsumer",
                late.get("median"),
                f"quartiles {late.get('q1')}-{late.get('q3')} (min {late.get('min')}, max "
                f"{late.get('max')})",
                "report",
                "jvm_consumer",
            )
        )
    return rows


_EXTRACT: Final[dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]]] = {
    "linear_hash": _linear_hash,
    "producer": _producer,
    "consumer": _consumer,
    "calls": calls_rows,
    "aio": aio_rows,
    "spark": _spark,
    "scale": _scale,
    "jvm": _jvm,
    "jvm_consumer": _jvm_consumer,
    "spark_jvm": spark_jvm_rows,
}


def summarise(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows from each benchmark's JSON (``name -> parsed JSON``)."""
    rows: list[dict[str, Any]] = []
    for name in _EXTRACT:
        if name in results:
            rows += _EXTRACT[name](results[name])
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render_markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the README's performance table)."""
    lines = [
        "| figure | value | baseline (same run) | ratio | spread | goal |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r["figure"], r["value"], r["baseline"], r["ratio"], r["spread"], r["goal"]]
        lines.append("| " + " | ".join(_cell(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def render_text(rows: list[dict[str, Any]]) -> str:
    """The rows as plain text, one line each (``ordered bench`` without ``--json``)."""
    out = []
    for r in rows:
        ratio = "" if r["ratio"] is None else f"  ratio {_cell(r['ratio'])}"
        base = "" if r["baseline"] is None else f"  vs {_cell(r['baseline'])}"
        spread = "" if r["spread"] is None else f"  ({_cell(r['spread'])})"
        out.append(f"{r['figure']}: {_cell(r['value'])}{base}{ratio}{spread}  [goal {r['goal']}]")
    return "\n".join(out)

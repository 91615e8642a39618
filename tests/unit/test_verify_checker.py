"""The checker of verifiable runs on hand-made histories with known violations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ordered.verify import HistoryWriter, check, decode_value, encode_value, read_events


def ack(p: str, seq: int, key: str, partition: int, offset: int, ts: int = 0) -> dict[str, Any]:
    return {"ev": "ack", "p": p, "k": key, "s": seq, "tp": partition, "o": offset, "ts": ts}


def dlv(
    ts: int,
    p: str,
    seq: int,
    key: str,
    partition: int,
    offset: int,
    *,
    group: str = "g",
    reader: str = "r1",
    pass_no: int = 0,
    epoch: int = 0,
) -> dict[str, Any]:
    return {
        "ev": "dlv",
        "g": group,
        "r": reader,
        "n": pass_no,
        "p": p,
        "k": key,
        "s": seq,
        "tp": partition,
        "o": offset,
        "e": epoch,
        "ts": ts,
    }


# Key "a" moved from partition 0 to partition 2 at epoch 1: seqs 0, 1 in partition 0,
# seqs 2, 3 in partition 2.
ACKS = [ack("p1", 0, "a", 0, 10), ack("p1", 1, "a", 0, 11), ack("p1", 2, "a", 2, 5)]
ACKS.append(ack("p1", 3, "a", 2, 6))


def in_order(group: str = "g", reader: str = "r1", start: int = 0) -> list[dict[str, Any]]:
    return [
        dlv(start + 1, "p1", 0, "a", 0, 10, group=group, reader=reader),
        dlv(start + 2, "p1", 1, "a", 0, 11, group=group, reader=reader),
        dlv(start + 3, "p1", 2, "a", 2, 5, group=group, reader=reader, epoch=1),
        dlv(start + 4, "p1", 3, "a", 2, 6, group=group, reader=reader, epoch=1),
    ]


def test_an_ordered_complete_history_holds() -> None:
    verdict = check(ACKS + in_order())
    assert verdict.holds
    assert verdict.records == 4
    assert verdict.groups["g"] == {
        "delivered": 4,
        "deliveries": 4,
        "duplicates": 0,
        "replayed": 0,
        "copies": 0,
        "lost": 0,
    }


def test_a_first_delivery_out_of_order_is_reported_with_its_places() -> None:
    # Reader r2 delivers seq 2 (partition 2, epoch 1) before r1 delivers seq 1.
    events = [
        *ACKS,
        dlv(1, "p1", 0, "a", 0, 10),
        dlv(2, "p1", 2, "a", 2, 5, reader="r2", epoch=1),
        dlv(3, "p1", 1, "a", 0, 11),
        dlv(4, "p1", 3, "a", 2, 6, reader="r2", epoch=1),
    ]
    verdict = check(events)
    assert not verdict.holds
    first = [v for v in verdict.violations if v.check == "first-delivery"]
    assert len(first) == 1
    v = first[0]
    assert (v.group, v.producer, v.key) == ("g", "p1", "a")
    assert v.record == {
        "seq": 1,
        "partition": 0,
        "offset": 11,
        "epoch": 0,
        "reader": "r1",
        "pass": 0,
    }
    assert v.after == {"seq": 2, "partition": 2, "offset": 5, "epoch": 1, "reader": "r2", "pass": 0}
    assert "key 'a'" in str(v) and "partition 2 offset 5 epoch 1" in str(v)
    # Two different readers: no single pass saw the break.
    assert verdict.violation_count == 1


def test_a_redelivery_after_a_crash_is_a_duplicate_not_a_violation() -> None:
    # r1 delivers 0 and 1, dies before committing 1; r2 redelivers 1, then moves on.
    events = [
        *ACKS,
        dlv(1, "p1", 0, "a", 0, 10),
        dlv(2, "p1", 1, "a", 0, 11),
        dlv(3, "p1", 1, "a", 0, 11, reader="r2"),
        dlv(4, "p1", 2, "a", 2, 5, reader="r2", epoch=1),
        dlv(5, "p1", 3, "a", 2, 6, reader="r2", epoch=1),
    ]
    verdict = check(events)
    assert verdict.holds
    assert verdict.duplicates == 1
    assert verdict.groups["g"]["duplicates"] == 1
    assert verdict.groups["g"]["replayed"] == 0


def test_a_replay_pass_out_of_order_is_reported_for_that_pass_only() -> None:
    # After a full pass, r1 seeks back (pass 1) and replays seq 2 before seq 0 and 1:
    # the running-consumer seek. First deliveries are fine, the pass is not.
    seek = {"ev": "pass", "g": "g", "r": "r1", "n": 1, "why": "seek", "ts": 10}
    events = [
        *ACKS,
        *in_order(),
        seek,
        dlv(11, "p1", 2, "a", 2, 5, pass_no=1, epoch=1),
        dlv(12, "p1", 0, "a", 0, 10, pass_no=1),
        dlv(13, "p1", 1, "a", 0, 11, pass_no=1),
        dlv(14, "p1", 3, "a", 2, 6, pass_no=1, epoch=1),
    ]
    verdict = check(events)
    assert not verdict.holds
    assert {v.check for v in verdict.violations} == {"reader-pass"}
    assert verdict.violation_count == 2  # seqs 0 and 1 both came after seq 2
    assert {v.scope for v in verdict.violations} == {"r1#1"}
    assert [v.record["seq"] for v in verdict.violations] == [0, 1]
    assert verdict.groups["g"]["replayed"] == 4


def test_an_ordered_replay_pass_holds() -> None:
    seek = {"ev": "pass", "g": "g", "r": "r1", "n": 1, "why": "seek", "ts": 10}
    replay = [{**d, "n": 1, "ts": d["ts"] + 10} for d in in_order()]
    verdict = check([*ACKS, *in_order(), seek, *replay])
    assert verdict.holds
    assert verdict.groups["g"]["replayed"] == 4
    assert verdict.duplicates == 4


def test_a_reset_pass_across_readers_out_of_order_is_reported() -> None:
    # Offsets reset while the group was stopped; after it, r3 replays partition 2 while
    # r4 has not yet replayed partition 0: each reader alone is in order.
    reset = {"ev": "reset", "g": "g", "ts": 10}
    events = [
        *ACKS,
        *in_order(),
        reset,
        dlv(11, "p1", 2, "a", 2, 5, reader="r3", epoch=1),
        dlv(12, "p1", 0, "a", 0, 10, reader="r4"),
        dlv(13, "p1", 1, "a", 0, 11, reader="r4"),
        dlv(14, "p1", 3, "a", 2, 6, reader="r3", epoch=1),
    ]
    verdict = check(events)
    assert [v.check for v in verdict.violations] == ["reset-pass", "reset-pass"]
    assert verdict.violations[0].scope == "reset@10"
    assert verdict.groups["g"]["replayed"] == 4


def test_an_acked_record_never_delivered_is_lost_and_a_trim_is_named() -> None:
    low = {"ev": "low", "tp": 0, "o": 11, "ts": 5}
    events = [*ACKS, low, *in_order()[:1], *in_order()[2:]]  # seq 1 (offset 11) missing
    verdict = check(events)
    assert not verdict.holds
    assert verdict.lost_count == 1
    assert verdict.lost == [
        {
            "group": "g",
            "producer": "p1",
            "seq": 1,
            "key": "a",
            "partition": 0,
            "offset": 11,
            "trimmed": False,
            "log_start_seen": 11,
        }
    ]
    # The same with the log start past it: trimmed before the group got it.
    verdict = check([*events, {"ev": "low", "tp": 0, "o": 12, "ts": 6}])
    assert verdict.lost[0]["trimmed"] is True


def test_every_complete_group_must_have_every_record() -> None:
    verdict = check([*ACKS, *in_order("g1")], complete_groups=["g1", "g2"])
    assert verdict.groups["g2"]["lost"] == 4
    assert verdict.lost_count == 4
    assert not verdict.holds


def test_an_unacked_or_failed_record_is_not_required() -> None:
    nack = {"ev": "nack", "p": "p1", "k": "a", "s": 4, "err": "timed out", "ts": 0}
    verdict = check([*ACKS, nack, *in_order()])
    assert verdict.holds
    assert verdict.nacked == 1


def test_a_delivered_key_that_differs_from_the_acked_key_is_caught() -> None:
    events = [*ACKS, *in_order()]
    events[-1] = {**events[-1], "k": "b"}
    verdict = check(events)
    assert verdict.mismatched == 1
    assert not verdict.holds


def test_a_paused_group_counts_the_trims_it_slept_through() -> None:
    events = [
        *ACKS,
        {"ev": "low", "tp": 0, "o": 0, "ts": 1},
        {"ev": "pause", "g": "g", "ts": 2},
        {"ev": "low", "tp": 0, "o": 5, "ts": 3},
        {"ev": "low", "tp": 0, "o": 9, "ts": 4},
        {"ev": "resume", "g": "g", "ts": 1_000_000_005},
        {"ev": "low", "tp": 0, "o": 10, "ts": 1_000_000_006},
        *in_order(start=1_000_000_010),
    ]
    verdict = check(events)
    assert verdict.holds
    [proof] = verdict.pauses
    assert (proof.group, proof.trims, proof.lost) == ("g", 2, 0)
    assert proof.paused_s == 1.0


def test_violations_are_capped_in_the_list_but_counted_exactly() -> None:
    events: list[dict[str, Any]] = []
    for i in range(120):
        events.append(ack("p1", 2 * i, f"k{i}", 0, 2 * i))
        events.append(ack("p1", 2 * i + 1, f"k{i}", 1, i))
        events.append(dlv(10 * i + 1, "p1", 2 * i + 1, f"k{i}", 1, i, reader="r2"))
        events.append(dlv(10 * i + 2, "p1", 2 * i, f"k{i}", 0, 2 * i))
    verdict = check(events)
    assert verdict.violation_count == 120
    assert len(verdict.violations) == 50


def test_histories_survive_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as writer:
        writer.write({"ev": "ack", "p": "p1", "k": "a", "s": 0, "tp": 0, "o": 0})
        writer.add({"ev": "nack", "p": "p1", "k": "a", "s": 1, "err": "x"})
    with open(path, "a") as handle:
        handle.write('{"ev":"ack","p":"p1"')  # a writer killed mid-line
    events = list(read_events([path]))
    assert [e["ev"] for e in events] == ["ack", "nack"]
    assert all(isinstance(e["ts"], int) for e in events)


def test_values_carry_producer_and_sequence() -> None:
    value = encode_value("p3-1", 42, padding=5)
    assert value == b"p3-1|42|xxxxx"
    assert decode_value(value) == ("p3-1", 42)
    assert decode_value(b"plain") is None
    assert decode_value(None) is None
    assert decode_value(b"p|notanumber|") is None


def test_a_record_at_two_places_is_a_copy_and_breaks_exactly_once() -> None:
    # The output of an exactly-once stage holds seq 1 twice (an aborted transaction's
    # record that was read anyway, or a replay written again): offsets 11 and 12.
    events = [*ACKS, *in_order("out"), dlv(10, "p1", 1, "a", 0, 12, group="out")]
    verdict = check(events)
    assert verdict.groups["out"]["copies"] == 1
    assert verdict.holds  # at-least-once: counted, allowed
    verdict = check(events, exactly_once_groups=["out"])
    assert verdict.copies == 1
    assert not verdict.holds
    # A redelivery from the same place is no copy.
    again = [*ACKS, *in_order("out"), dlv(10, "p1", 1, "a", 0, 11, group="out")]
    assert check(again, exactly_once_groups=["out"]).holds


def test_a_copy_the_input_already_holds_is_no_exactly_once_violation() -> None:
    # The input topic holds seq 1 twice (an idempotent producer's retry after a leader
    # move wrote it again at offset 12): the input group sees both places, and an
    # exactly-once stage rightly copies each input record once, so its output has two.
    twice_in = [*ACKS, *in_order("g"), dlv(10, "p1", 1, "a", 0, 12, group="g")]
    twice_out = [*in_order("out"), dlv(11, "p1", 1, "a", 0, 12, group="out")]
    verdict = check(twice_in + twice_out, exactly_once_groups=["out"])
    assert verdict.groups["out"]["copies"] == 1 and verdict.input_copies == 1
    assert verdict.copies == 0 and verdict.holds
    # A third place in the output is one copy more than the input has: a violation.
    thrice = [*twice_in, *twice_out, dlv(12, "p1", 1, "a", 0, 13, group="out")]
    verdict = check(thrice, exactly_once_groups=["out"])
    assert verdict.copies == 1 and not verdict.holds

"""The checker's commit rule: no group commits past an acked record none of it delivered."""

from __future__ import annotations

from typing import Any

from ordered.verify import check


def ack(p: str, seq: int, key: str, partition: int, offset: int) -> dict[str, Any]:
    return {"ev": "ack", "p": p, "k": key, "s": seq, "tp": partition, "o": offset, "ts": 0}


def dlv(
    ts: int, seq: int, offset: int, *, group: str = "g", reader: str = "r1", pass_no: int = 0
) -> dict[str, Any]:
    return {
        "ev": "dlv",
        "g": group,
        "r": reader,
        "n": pass_no,
        "p": "p1",
        "k": f"k{seq}",
        "s": seq,
        "tp": 2,
        "o": offset,
        "e": 0,
        "ts": ts,
    }


def cmt(
    ts: int, offset: int, *, group: str = "g", reader: str = "r1", why: str = "commit"
) -> dict[str, Any]:
    event = {"ev": "cmt", "g": group, "r": reader, "t": "chaos", "tp": 2, "o": offset}
    return {**event, "why": why, "ts": ts}


# Five records on partition 2, offsets 100-104 (seq 0-4, one key each).
ACKS = [ack("p1", seq, f"k{seq}", 2, 100 + seq) for seq in range(5)]


def test_a_commit_past_an_undelivered_acked_record_is_reported() -> None:
    # The chaos-90417 shape: offsets 100-102 delivered and committed (103), then 104
    # delivered and 105 committed: offset 103 was never delivered by any member.
    events = [
        *ACKS,
        dlv(1, 0, 100),
        dlv(1, 1, 101),
        dlv(1, 2, 102),
        cmt(2, 103),
        dlv(3, 4, 104, reader="r2", pass_no=1),
        cmt(4, 105, reader="r2"),
    ]
    verdict = check(events)
    assert verdict.committed_past_count == 1
    assert verdict.groups["g"]["committed_past_undelivered"] == 1
    assert verdict.groups["g"]["commits"] == 2
    assert verdict.committed_past == [
        {
            "group": "g",
            "producer": "p1",
            "seq": 3,
            "key": "k3",
            "partition": 2,
            "offset": 103,
            "committed": 105,
            "committed_by": "r2",
            "commit": "commit",
            "commit_ts": 4,
            "delivered_later": False,
        }
    ]
    assert not verdict.holds
    result = verdict.to_dict()
    assert result["committed_past_undelivered"] == 1
    assert result["committed_past_samples"][0]["offset"] == 103
    assert result["lost"] == 1  # also lost: never delivered


def test_a_record_delivered_after_the_commit_that_passed_it_is_still_reported() -> None:
    # Not lost (delivered at ts 5), but for a while the group counted it as consumed.
    events = [*ACKS, *(dlv(1, s, 100 + s) for s in (0, 1, 2, 4)), cmt(2, 105)]
    events.append(dlv(5, 3, 103, reader="r2", pass_no=1))
    verdict = check(events)
    assert verdict.lost_count == 0
    assert verdict.committed_past_count == 1
    assert verdict.committed_past[0]["offset"] == 103
    assert verdict.committed_past[0]["delivered_later"] is True
    assert not verdict.holds


def test_commits_of_everything_delivered_hold() -> None:
    events = [*ACKS]
    for seq in range(5):
        events += [dlv(2 * seq + 1, seq, 100 + seq), cmt(2 * seq + 2, 101 + seq)]
    verdict = check(events)
    assert verdict.committed_past_count == 0
    assert verdict.groups["g"]["committed_past_undelivered"] == 0
    assert verdict.groups["g"]["commits"] == 5
    assert verdict.holds
    assert verdict.to_dict()["committed_past_samples"] == []


def test_a_replay_groups_seek_back_and_its_lower_commits_hold() -> None:
    # The replay group reads everything, commits 105, seeks back to 100 (a new pass)
    # and commits lower offsets as it reads the records again: nothing is passed.
    events = [*ACKS, *(dlv(1, s, 100 + s, group="replay") for s in range(5))]
    events.append(cmt(2, 105, group="replay"))
    events.append({"ev": "pass", "g": "replay", "r": "r1", "n": 1, "why": "seek", "ts": 3})
    events.append(cmt(3, 100, group="replay", why="read"))
    for seq in range(3):
        events.append(dlv(4 + seq, seq, 100 + seq, group="replay", pass_no=1))
        events.append(cmt(4 + seq, 101 + seq, group="replay"))
    verdict = check(events)
    assert verdict.groups["replay"]["replayed"] == 3
    assert verdict.groups["replay"]["committed_past_undelivered"] == 0
    assert verdict.committed_past_count == 0
    assert verdict.holds


def test_a_record_another_member_delivered_before_the_commit_holds() -> None:
    # r1 delivers 100-102 and dies before it commits; r2 gets the partition, its own
    # fetch starts at 103 (say, a commit r1 made that its history did not keep) and it
    # commits 105: offsets 100-102 were delivered, by r1, before that commit.
    events = [*ACKS, *(dlv(1, s, 100 + s) for s in range(3))]
    events += [dlv(3, 3, 103, reader="r2", pass_no=1), dlv(3, 4, 104, reader="r2", pass_no=1)]
    events.append(cmt(4, 105, reader="r2"))
    verdict = check(events)
    assert verdict.committed_past_count == 0
    assert verdict.groups["g"]["committed_past_undelivered"] == 0
    assert verdict.holds


def test_only_complete_groups_on_the_producers_topic_are_checked() -> None:
    # Group "late" need not be complete; the exactly-once group "out" reads another
    # topic; a commit recorded on another topic is left out when the topic is named.
    passing = [
        *ACKS,
        dlv(1, 4, 104),
        cmt(2, 105),
        dlv(1, 4, 104, group="late"),
        cmt(2, 105, group="late"),
        dlv(1, 4, 0, group="out"),
        cmt(2, 105, group="out"),
    ]
    verdict = check(passing, complete_groups=["g", "out"], exactly_once_groups=["out"])
    assert verdict.committed_past_count == 4  # offsets 100-103 of group "g" only
    assert "commits" not in verdict.groups["late"] and "commits" not in verdict.groups["out"]
    other = [*ACKS, dlv(1, 4, 104), {**cmt(2, 105), "t": "chaos-out"}]
    verdict = check(other, complete_groups=["g"], topic="chaos")
    assert verdict.committed_past_count == 0 and "commits" not in verdict.groups["g"]
    assert check(other, complete_groups=["g"]).committed_past_count == 4

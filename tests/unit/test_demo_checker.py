"""The demo's order checker on hand-written worker files."""

from __future__ import annotations

from pathlib import Path

from ordered.demo import checker


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_in_order_across_members_and_partitions(tmp_path: Path) -> None:
    acks = _write(tmp_path / "p.txt", ["p k1 0 0 10", "p k1 1 2 0", "p k2 0 1 5", "# {}"])
    # The key moved from partition 0 to 2; the second member delivered it later.
    a = _write(tmp_path / "a.txt", ["100 p k1 0 0 10", "300 p k2 0 1 5", '# {"delivered": 2}'])
    b = _write(tmp_path / "b.txt", ["200 p k1 1 2 0"])
    result = checker.check(checker.read_acks([acks]), checker.read_deliveries([a, b]))
    assert (result.acked, result.delivered, result.duplicates) == (3, 3, 0)
    assert result.violations == [] and result.lost == []
    assert checker.worker_summary(a) == {"delivered": 2}


def test_reports_a_violation_with_its_places(tmp_path: Path) -> None:
    acks = _write(tmp_path / "p.txt", ["p k1 0 0 10", "p k1 1 2 0"])
    # Member b delivered seq 1 (partition 2) before member a delivered seq 0.
    a = _write(tmp_path / "a.txt", ["300 p k1 0 0 10"])
    b = _write(tmp_path / "b.txt", ["200 p k1 1 2 0"])
    result = checker.check(checker.read_acks([acks]), checker.read_deliveries([a, b]))
    assert [v.to_dict() for v in result.violations] == [
        {
            "producer": "p",
            "key": "k1",
            "seq": 0,
            "after_seq": 1,
            "partition": 0,
            "offset": 10,
            "after_partition": 2,
            "after_offset": 0,
        }
    ]


def test_counts_lost_and_duplicates_and_ignores_later_replays(tmp_path: Path) -> None:
    acks = _write(tmp_path / "p.txt", ["p k 0 0 0", "p k 1 0 1", "p k 2 0 2"])
    # seq 0 and 1 delivered, then re-delivered after a rebalance (no violation); 2 lost.
    a = _write(tmp_path / "a.txt", ["1 p k 0 0 0", "2 p k 1 0 1", "3 p k 0 0 0", "4 p k 1 0 1"])
    result = checker.check(checker.read_acks([acks]), checker.read_deliveries([a]))
    assert result.violations == []
    assert result.duplicates == 2
    assert result.lost == [("p", "k", 2)]

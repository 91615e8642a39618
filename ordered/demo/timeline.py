"""The demo's timeline picture (matplotlib, Agg: no display needed).

Top: one lane per partition, coloured by its state over time (see
:mod:`ordered.demo.monitor`), with every epoch's seal as a vertical line labelled with
the layout change. Bottom: records written per second into each partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The object API without pyplot: no global figure state, and PNGs render with Agg
# whatever backend the environment names (no display needed).
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ordered.demo.monitor import STATES, Sample

__all__ = ["Mark", "draw"]

_COLOURS = {
    "active": "#2ca02c",
    "gated": "#f2c12e",
    "blocked": "#d62728",
    "retiring": "#c05bc0",
    "draining": "#4a7fd6",
    "trimmed": "#b0b0b0",
}


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment to mark on the timeline.

    Attributes:
        t: Seconds since the monitor started.
        label: What happened (``epoch 2: 3 -> 4``); empty for an unlabelled dotted line
            (where a layout change began: its epoch is pending until the labelled seal).
    """

    t: float
    label: str = ""


def _segments(samples: Sequence[Sample], partition: int) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for i, s in enumerate(samples):
        part = s.parts.get(partition)
        if part is None:
            continue
        end = samples[i + 1].t if i + 1 < len(samples) else s.t + 0.5
        spans = out.setdefault(part.state, [])
        if spans and abs(spans[-1][0] + spans[-1][1] - s.t) < 1e-9:
            spans[-1] = (spans[-1][0], end - spans[-1][0])
        else:
            spans.append((s.t, end - s.t))
    return out


def draw(samples: Sequence[Sample], marks: Sequence[Mark], path: Path, title: str) -> Path:
    """Draw the timeline of ``samples`` into the PNG ``path`` and return ``path``."""
    partitions = sorted({p for s in samples for p in s.parts})
    fig = Figure(figsize=(12, 3.2 + 0.45 * max(1, len(partitions)) + 2.6))
    lanes, rates = fig.subplots(
        2,
        1,
        sharex=True,
        gridspec_kw={"height_ratios": [max(2, len(partitions)), 3]},
    )
    for row, p in enumerate(partitions):
        for state, spans in _segments(samples, p).items():
            lanes.broken_barh(spans, (row - 0.38, 0.76), facecolors=_COLOURS.get(state, "#000000"))
    lanes.set_yticks(range(len(partitions)), [f"partition {p}" for p in partitions])
    lanes.set_ylabel("state per partition")
    # A band above the lanes holds the labels of the marks (two rows, so that close
    # marks do not overlap).
    lanes.set_ylim(len(partitions) - 0.5, -1.6)
    fig.suptitle(title, fontsize=12, x=0.01, ha="left")
    end = samples[-1].t if samples else 1.0
    labelled = [m for m in marks if m.label]
    for m in marks:
        if not m.label:
            for ax in (lanes, rates):
                ax.axvline(m.t, color="#777777", linestyle=":", linewidth=1)
    for i, m in enumerate(labelled):
        for ax in (lanes, rates):
            ax.axvline(m.t, color="#333333", linestyle="--", linewidth=1)
        lanes.text(
            m.t,
            -1.2 if i % 2 == 0 else -0.75,
            f" {m.label}",
            fontsize=9,
            va="center",
            ha="left",
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
        )
    used = [s for s in STATES if any(part.state == s for x in samples for part in x.parts.values())]
    lanes.legend(
        handles=[Patch(color=_COLOURS[s], label=s) for s in used],
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=9,
        title="state",
    )
    times = [s.t for s in samples]
    for p in partitions:
        values = [s.parts[p].rate_in if p in s.parts else 0.0 for s in samples]
        rates.plot(times, values, linewidth=1.2, label=f"partition {p}")
    rates.set_ylabel("records written / s")
    rates.set_xlabel("seconds since start")
    rates.set_xlim(0, end)
    rates.set_ylim(bottom=0)
    rates.grid(alpha=0.3)
    rates.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path

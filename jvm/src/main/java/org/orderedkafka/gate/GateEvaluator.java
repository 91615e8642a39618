package org.orderedkafka.gate;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The gate rule of {@code docs/consumer.md}, on the JVM: a line-for-line port of Python's
 * {@code linear_hash.gating.GateEvaluator}, checked against the same golden vectors
 * ({@code vectors/linear_hash.json}, {@code gates}). Pure logic, no I/O.
 *
 * <p>A record of partition {@code b} at offset {@code o} may be delivered when, for every
 * epoch {@code e} with an edge {@code a -> b} and {@code B_b(e) <= o}, the epoch is sealed and
 * {@code reached(a, B_a(e))} holds, where {@code reached(a, o)} means
 *
 * <ol>
 *   <li>the group's committed offset on {@code a} is at least {@code o}, or {@code o} is at
 *       most the log start offset of {@code a}; and
 *   <li>for every <em>earlier</em> epoch {@code e'} with an edge {@code x -> a} and {@code
 *       B_a(e') <= o}: {@code e'} is sealed and {@code reached(x, B_x(e'))} holds.
 * </ol>
 *
 * <p>Open gates are cached (the group's progress only grows); {@link #forget} drops the cache
 * after a rewind. Not thread-safe.
 */
public final class GateEvaluator {
  /** A gate: the destination partition and the epoch. */
  public record Gate(int partition, long epoch) {}

  /** One thing a closed gate waits for ({@code partition} -1: a pending epoch). */
  public record Wait(int partition, long offset, long epoch) implements Comparable<Wait> {
    private static final Comparator<Wait> ORDER =
        Comparator.comparingInt(Wait::partition)
            .thenComparingLong(Wait::offset)
            .thenComparingLong(Wait::epoch);

    @Override
    public int compareTo(Wait other) {
      return ORDER.compare(this, other);
    }
  }

  /** {@link #limit} of a partition whose every gate is known to be open. */
  public static final long NO_LIMIT = Long.MAX_VALUE;

  private final Set<Gate> satisfied = new HashSet<>();
  private List<EpochInfo> history = List.of();
  /** partition -> [(boundary, epoch)] where it receives keys, ascending. */
  private Map<Integer, List<long[]>> incoming = Map.of();
  /** (destination, epoch) -> sources, ascending. */
  private Map<Gate, int[]> sources = Map.of();
  /** partition -> sorted boundaries of sealed epochs where it gives keys. */
  private Map<Integer, List<Long>> outgoing = Map.of();
  private Map<Long, EpochInfo> byEpoch = Map.of();
  private final Map<Integer, Long> limits = new HashMap<>();

  public GateEvaluator(Collection<EpochInfo> history) {
    update(history);
  }

  /** The epochs in force, ascending. */
  public List<EpochInfo> history() {
    return history;
  }

  /** The highest epoch known, -1 with no history. */
  public long latestEpoch() {
    return history.isEmpty() ? -1 : history.get(history.size() - 1).epoch;
  }

  /** The cached open gates. */
  public Set<Gate> satisfied() {
    return Set.copyOf(satisfied);
  }

  /** Replace the history, keeping the cache of satisfied gates (sealed epochs never change). */
  public void update(Collection<EpochInfo> epochs) {
    List<EpochInfo> sorted = new ArrayList<>(epochs);
    sorted.sort(Comparator.comparingLong(e -> e.epoch));
    Map<Long, EpochInfo> by = new HashMap<>();
    Map<Integer, List<long[]>> in = new HashMap<>();
    Map<Gate, TreeSet<Integer>> src = new HashMap<>();
    Map<Integer, List<Long>> out = new HashMap<>();
    for (EpochInfo info : sorted) {
      by.put(info.epoch, info);
      Set<Integer> destinations = new TreeSet<>();
      for (int[] edge : info.edges) {
        int a = edge[0];
        int b = edge[1];
        src.computeIfAbsent(new Gate(b, info.epoch), k -> new TreeSet<>()).add(a);
        if (info.sealed && info.boundaries.containsKey(a)) {
          out.computeIfAbsent(a, k -> new ArrayList<>()).add(info.boundaries.get(a));
        }
        destinations.add(b);
      }
      for (int b : destinations) {
        // A receiving boundary missing from the record: block from offset 0, the only
        // safe reading of a malformed epoch.
        long boundary = info.boundaries.getOrDefault(b, 0L);
        in.computeIfAbsent(b, k -> new ArrayList<>()).add(new long[] {boundary, info.epoch});
      }
    }
    Comparator<long[]> pairs =
        Comparator.<long[]>comparingLong(x -> x[0]).thenComparingLong(x -> x[1]);
    for (List<long[]> gates : in.values()) {
      gates.sort(pairs);
    }
    for (List<Long> marks : out.values()) {
      marks.sort(null);
    }
    Map<Gate, int[]> sourceArrays = new HashMap<>();
    for (Map.Entry<Gate, TreeSet<Integer>> e : src.entrySet()) {
      sourceArrays.put(e.getKey(), e.getValue().stream().mapToInt(Integer::intValue).toArray());
    }
    history = List.copyOf(sorted);
    byEpoch = by;
    incoming = in;
    sources = sourceArrays;
    outgoing = out;
    satisfied.removeIf(g -> !by.containsKey(g.epoch()));
    limits.clear();
  }

  /** Drop the cache of satisfied gates (the group's progress may have gone back). */
  public void forget() {
    satisfied.clear();
    limits.clear();
  }

  /** Every gate of {@code partition} as {@code [boundary, epoch]}, ascending. */
  public List<long[]> gatesOf(int partition) {
    List<long[]> out = new ArrayList<>();
    for (long[] g : incoming.getOrDefault(partition, List.of())) {
      out.add(g.clone());
    }
    return out;
  }

  /**
   * The lowest boundary of a gate of {@code partition} not known to be open; {@link #NO_LIMIT}
   * when every gate is known to be open.
   */
  public long limit(int partition) {
    Long cached = limits.get(partition);
    if (cached != null) {
      return cached;
    }
    long limit = NO_LIMIT;
    for (long[] g : incoming.getOrDefault(partition, List.of())) {
      if (!satisfied.contains(new Gate(partition, g[1]))) {
        limit = g[0];
        break;
      }
    }
    limits.put(partition, limit);
    return limit;
  }

  /** Boundaries {@code B_a(e)} of sealed epochs where {@code partition} gives keys away. */
  public List<Long> sourceMarks(int partition) {
    return List.copyOf(outgoing.getOrDefault(partition, List.of()));
  }

  /** Whether {@code partition} gives keys away in some epoch. */
  public boolean isSource(int partition) {
    for (EpochInfo info : history) {
      for (int[] e : info.edges) {
        if (e[0] == partition) {
          return true;
        }
      }
    }
    return false;
  }

  /** Whether the record of {@code partition} at {@code offset} may be delivered. */
  public boolean mayDeliver(int partition, long offset, OffsetView view) {
    return !walk(partition, offset, view, null);
  }

  /** What keeps the record of {@code partition} at {@code offset} from delivery, sorted. */
  public List<Wait> waitingOn(int partition, long offset, OffsetView view) {
    TreeSet<Wait> found = new TreeSet<>();
    walk(partition, offset, view, found);
    return new ArrayList<>(found);
  }

  /** Partitions whose progress a check of {@code (partition, offset)} may read. */
  public Set<Integer> requiredPartitions(int partition, long offset) {
    Set<Integer> needed = new TreeSet<>();
    Set<List<Long>> seen = new HashSet<>();
    List<long[]> stack = new ArrayList<>();
    stack.add(new long[] {partition, offset, Long.MAX_VALUE});
    while (!stack.isEmpty()) {
      long[] top = stack.remove(stack.size() - 1);
      int b = (int) top[0];
      long o = top[1];
      long before = top[2];
      for (long[] g : incoming.getOrDefault(b, List.of())) {
        long boundary = g[0];
        long epoch = g[1];
        if (boundary > o || epoch >= before || satisfied.contains(new Gate(b, epoch))) {
          continue;
        }
        EpochInfo info = byEpoch.get(epoch);
        for (int a : sources.getOrDefault(new Gate(b, epoch), new int[0])) {
          Long bound = info.boundaries.get(a);
          if (bound == null || !seen.add(List.of((long) a, bound, epoch))) {
            continue;
          }
          needed.add(a);
          stack.add(new long[] {a, bound, epoch});
        }
      }
    }
    return needed;
  }

  /** True if some gate of {@code b} at or below {@code o} is closed. */
  private boolean walk(int b, long o, OffsetView view, Set<Wait> collect) {
    Map<Gate, Boolean> memo = new HashMap<>();
    boolean closed = false;
    for (long[] g : incoming.getOrDefault(b, List.of())) {
      if (g[0] > o) {
        break;
      }
      if (!gateOpen(b, g[1], view, memo, collect)) {
        closed = true;
        if (collect == null) {
          return true;
        }
      }
    }
    return closed;
  }

  private boolean gateOpen(
      int b, long epoch, OffsetView view, Map<Gate, Boolean> memo, Set<Wait> collect) {
    Gate key = new Gate(b, epoch);
    if (satisfied.contains(key)) {
      return true;
    }
    Boolean known = memo.get(key);
    if (known != null) {
      return known;
    }
    // A gate under evaluation counts as closed for anyone who reaches it again.
    memo.put(key, false);
    EpochInfo info = byEpoch.get(epoch);
    if (!info.sealed) {
      if (collect != null) {
        collect.add(new Wait(-1, -1, epoch));
      }
      return false;
    }
    boolean open = true;
    for (int a : sources.getOrDefault(key, new int[0])) {
      Long bound = info.boundaries.get(a);
      if (bound == null) {
        if (collect != null) {
          collect.add(new Wait(a, -1, epoch));
        }
        open = false;
      } else if (!reached(a, bound, epoch, view, memo, collect)) {
        open = false;
      }
      if (!open && collect == null) {
        break;
      }
    }
    memo.put(key, open);
    if (open) {
      satisfied.add(key);
      limits.remove(b);
    }
    return open;
  }

  private boolean reached(
      int a, long o, long before, OffsetView view, Map<Gate, Boolean> memo, Set<Wait> collect) {
    boolean done = true;
    Long committed = view.committed(a);
    if ((committed == null || committed < o) && view.logStart(a) < o) {
      if (collect == null) {
        return false;
      }
      collect.add(new Wait(a, o, before));
      done = false;
    }
    for (long[] g : incoming.getOrDefault(a, List.of())) {
      if (g[0] > o) {
        break;
      }
      if (g[1] >= before) {
        continue;
      }
      if (!gateOpen(a, g[1], view, memo, collect)) {
        done = false;
        if (collect == null) {
          return false;
        }
      }
    }
    return done;
  }
}

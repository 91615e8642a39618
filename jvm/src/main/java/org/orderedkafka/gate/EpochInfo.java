package org.orderedkafka.gate;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What the gates need of one epoch of a topic's layout history (Python's {@code
 * linear_hash.gating.EpochInfo}).
 *
 * <p>{@code edges} are the {@code (source, destination)} key-flow pairs of the change into
 * this epoch; {@code boundaries} map a partition to the first offset written under this
 * epoch or later (receiving partitions from the publish, giving partitions from the seal).
 */
public final class EpochInfo {
  public final long epoch;
  public final boolean sealed;
  /** {@code [source, destination]} pairs, in the record's order. */
  public final List<int[]> edges;
  public final Map<Integer, Long> boundaries;
  /** The active partition count of the epoch's layout (0 if unknown). */
  public final int toActive;

  public EpochInfo(
      long epoch, boolean sealed, List<int[]> edges, Map<Integer, Long> boundaries, int toActive) {
    this.epoch = epoch;
    this.sealed = sealed;
    List<int[]> copy = new ArrayList<>();
    for (int[] e : edges) {
      if (e.length != 2) {
        throw new IllegalArgumentException("an edge is a [source, destination] pair");
      }
      copy.add(new int[] {e[0], e[1]});
    }
    this.edges = Collections.unmodifiableList(copy);
    this.boundaries = Collections.unmodifiableMap(new TreeMap<>(boundaries));
    this.toActive = toActive;
  }

  /**
   * Build from an epoch record's JSON object (as {@code Json.parse} returns it): {@code epoch},
   * {@code state} ({@code "pending"}/{@code "sealed"}) or {@code sealed}, {@code edges},
   * {@code boundaries} (decimal string keys) and optionally {@code to_active}.
   */
  public static EpochInfo fromJson(Map<String, Object> m) {
    boolean sealed =
        m.containsKey("sealed")
            ? Boolean.TRUE.equals(m.get("sealed"))
            : "sealed".equals(m.get("state"));
    List<int[]> edges = new ArrayList<>();
    Object rawEdges = m.get("edges");
    if (rawEdges != null) {
      for (Object o : (List<?>) rawEdges) {
        List<?> pair = (List<?>) o;
        edges.add(new int[] {((Number) pair.get(0)).intValue(), ((Number) pair.get(1)).intValue()});
      }
    }
    Map<Integer, Long> boundaries = new TreeMap<>();
    Object rawBounds = m.get("boundaries");
    if (rawBounds != null) {
      for (Map.Entry<?, ?> e : ((Map<?, ?>) rawBounds).entrySet()) {
        boundaries.put(Integer.parseInt(e.getKey().toString()), ((Number) e.getValue()).longValue());
      }
    }
    Object toActive = m.get("to_active");
    return new EpochInfo(
        ((Number) m.get("epoch")).longValue(),
        sealed,
        edges,
        boundaries,
        toActive == null ? 0 : ((Number) toActive).intValue());
  }

  @Override
  public String toString() {
    StringBuilder s = new StringBuilder("EpochInfo(" + epoch + (sealed ? " sealed" : " pending"));
    for (int[] e : edges) {
      s.append(' ').append(e[0]).append("->").append(e[1]);
    }
    return s.append(' ').append(boundaries).append(')').toString();
  }
}

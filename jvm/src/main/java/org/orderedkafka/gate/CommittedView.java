package org.orderedkafka.gate;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One view of a topic's progress for a round of gate decisions: the group's committed offsets
 * and the log starts of the partitions the rule asks about, each read once per decision
 * (C-GATE-5; a log start read is a lower bound, an unknown one 0: C-GATE-6). A read that fails
 * keeps every gate of the view closed for the round (C-GATE-5: Kafka did not answer).
 *
 * <p>Where the offsets come from, and how a reader raises (its own acknowledged commits) or
 * lowers (C-REPLAY-2) them, differ between the Java consumer and the Connect sink; the
 * reading rule is this one.
 */
public abstract class CommittedView implements OffsetView {
  private static final Logger LOG = LoggerFactory.getLogger(CommittedView.class);

  /** The topic whose partitions the view holds. */
  protected final String topic;

  private final Map<Integer, Long> committed = new HashMap<>();
  private final Map<Integer, Long> logStarts = new HashMap<>();
  private final Set<Integer> asked = new HashSet<>();
  private boolean failed;

  protected CommittedView(String topic) {
    this.topic = topic;
  }

  /** Read what the view lacks of {@code partitions} (nothing once a read failed). */
  public final void need(Set<Integer> partitions) {
    Set<Integer> ask = new TreeSet<>(partitions);
    ask.removeAll(asked);
    if (ask.isEmpty() || failed) {
      return;
    }
    try {
      Map<Integer, Long> found = readCommitted(ask);
      Map<Integer, Long> starts = readLogStarts(ask);
      for (int p : ask) {
        Long c = progress(p, found.get(p));
        if (c != null) {
          committed.put(p, c);
        }
        logStarts.put(p, starts.getOrDefault(p, 0L));
        asked.add(p);
      }
    } catch (RuntimeException e) {
      LOG.info(
          "cannot read the committed offsets of {} {} ({}): its gates stay closed", topic, ask, e.toString());
      failed = true;
    }
  }

  /** Whether a read failed: every gate of the view stays closed this round. */
  public final boolean failed() {
    return failed;
  }

  /** The group's committed offsets of {@code partitions} (a partition absent: none). */
  protected abstract Map<Integer, Long> readCommitted(Set<Integer> partitions);

  /** The log starts of {@code partitions} (a partition absent: 0). */
  protected abstract Map<Integer, Long> readLogStarts(Set<Integer> partitions);

  /**
   * The offset the rule takes as {@code partition}'s progress, given what the group committed
   * ({@code null}: nothing); by default that commit.
   */
  protected Long progress(int partition, Long committedOffset) {
    return committedOffset;
  }

  @Override
  public final Long committed(int partition) {
    return failed ? null : committed.get(partition);
  }

  @Override
  public final long logStart(int partition) {
    return failed ? 0L : logStarts.getOrDefault(partition, 0L);
  }
}

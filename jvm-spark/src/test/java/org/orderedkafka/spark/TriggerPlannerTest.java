package org.orderedkafka.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.orderedkafka.gate.EpochInfo;
import org.junit.jupiter.api.Test;

/**
 * Which reads a trigger makes and where its batch ends ({@link TriggerPlanner}): the reads
 * it skips (a finished AvailableNow run's last trigger; the log starts when nothing is held)
 * and the cases where it must not skip them.
 */
class TriggerPlannerTest {
  private static final String TOPIC = "t";
  /** The adoption: 2 partitions, no gates. */
  private static final EpochInfo ADOPTED = new EpochInfo(0, true, List.of(), Map.of(), 2);

  /** Reads answered from fields, counted. */
  private static final class Fake implements TriggerPlanner.Reads {
    Map<TopicPartition, Long> ends = Map.of();
    List<EpochInfo> epochs = List.of(ADOPTED);
    Map<TopicPartition, Long> logStarts = Map.of();
    int endReads;
    int layoutReads;
    int logStartReads;

    @Override
    public Map<TopicPartition, Long> ends() {
      endReads++;
      return ends;
    }

    @Override
    public List<EpochInfo> epochs(String topic) {
      layoutReads++;
      return epochs;
    }

    @Override
    public Map<TopicPartition, Long> logStarts() {
      logStartReads++;
      return logStarts;
    }
  }

  /** Partition -> offset of {@link #TOPIC}, from pairs. */
  private static Map<TopicPartition, Long> at(long... pairs) {
    Map<TopicPartition, Long> out = new HashMap<>();
    for (int i = 0; i < pairs.length; i += 2) {
      out.put(new TopicPartition(TOPIC, (int) pairs[i]), pairs[i + 1]);
    }
    return out;
  }

  /** The expansion 2 -> 3 (0 gives keys to 2) with these boundaries. */
  private static EpochInfo expansion(boolean sealed, Map<Integer, Long> boundaries) {
    return new EpochInfo(1, sealed, List.of(new int[] {0, 2}), boundaries, 3);
  }

  private static TriggerPlanner availableNow() {
    TriggerPlanner planner = new TriggerPlanner(true);
    planner.prepareForTriggerAvailableNow();
    return planner;
  }

  @Test
  void theLastTriggerOfAnAvailableNowRunReadsNothing() {
    TriggerPlanner planner = availableNow();
    Fake reads = new Fake();
    reads.ends = at(0, 100, 1, 80);
    TriggerPlanner.Plan first = planner.plan(at(0, 0, 1, 0), reads);
    assertEquals(at(0, 100, 1, 80), first.capped);
    assertFalse(first.fromTarget);
    // Nothing held: the log starts could open no gate.
    assertEquals(0, reads.logStartReads);
    assertEquals(List.of(1, 1), List.of(reads.endReads, reads.layoutReads));

    reads.ends = at(0, 150, 1, 90); // written after the target was frozen: not this run's
    TriggerPlanner.Plan last = planner.plan(at(0, 100, 1, 80), reads);
    assertTrue(last.fromTarget);
    assertEquals(at(0, 100, 1, 80), last.capped);
    assertEquals(List.of(1, 1, 0), List.of(reads.endReads, reads.layoutReads, reads.logStartReads));
  }

  @Test
  void aProcessingTimeTriggerReadsEveryTime() {
    TriggerPlanner planner = new TriggerPlanner(true);
    Fake reads = new Fake();
    reads.ends = at(0, 100, 1, 80);
    planner.plan(at(0, 0, 1, 0), reads);
    reads.ends = at(0, 120, 1, 80);
    TriggerPlanner.Plan next = planner.plan(at(0, 100, 1, 80), reads);
    assertFalse(next.fromTarget);
    assertEquals(at(0, 120, 1, 80), next.capped);
    assertEquals(List.of(2, 2), List.of(reads.endReads, reads.layoutReads));
  }

  @Test
  void aPartitionHeldBelowAGateStillReadsAndRaisesTheTarget() {
    TriggerPlanner planner = availableNow();
    Fake reads = new Fake();
    // Frozen while the expansion is pending: partition 2 is held at its boundary 0.
    reads.ends = at(0, 100, 1, 100, 2, 50);
    reads.epochs = List.of(ADOPTED, expansion(false, Map.of(2, 0L)));
    TriggerPlanner.Plan first = planner.plan(at(0, 0, 1, 0, 2, 0), reads);
    assertEquals(at(0, 100, 1, 100, 2, 0), first.capped);
    assertEquals(50, first.heldRecords);
    assertEquals(1, first.heldPartitions);

    // Sealed since, with partition 0's boundary above its frozen target: the held partition
    // keeps the run reading, and the target of 0 goes up to the boundary (never past it).
    reads.ends = at(0, 160, 1, 100, 2, 60);
    reads.epochs = List.of(ADOPTED, expansion(true, Map.of(0, 150L, 2, 0L)));
    TriggerPlanner.Plan second = planner.plan(first.capped, reads);
    assertFalse(second.fromTarget);
    assertEquals(at(0, 150, 1, 100, 2, 0), second.capped);
    assertEquals(List.of(2, 2), List.of(reads.endReads, reads.layoutReads));

    // Partition 0 at its boundary: the gate opens, 2 is read to its target.
    TriggerPlanner.Plan third = planner.plan(second.capped, reads);
    assertEquals(at(0, 150, 1, 100, 2, 50), third.capped);
    assertEquals(0, third.heldRecords);

    TriggerPlanner.Plan last = planner.plan(third.capped, reads);
    assertTrue(last.fromTarget);
    assertEquals(3, reads.endReads);
  }

  @Test
  void aHeldPartitionGetsTheLogStartsAndTrimmedRecordsCountAsPassed() {
    TriggerPlanner planner = new TriggerPlanner(true);
    Fake reads = new Fake();
    reads.ends = at(0, 100, 1, 100, 2, 40);
    reads.epochs = List.of(ADOPTED, expansion(true, Map.of(0, 50L, 2, 0L)));
    // The query is at 10 on partition 0, whose records below 60 were deleted since.
    reads.logStarts = at(0, 60, 1, 0, 2, 0);
    TriggerPlanner.Plan plan = planner.plan(at(0, 10, 1, 0, 2, 0), reads);
    assertEquals(1, reads.logStartReads);
    assertEquals(reads.logStarts, plan.logStarts);
    assertEquals(at(0, 100, 1, 100, 2, 40), plan.capped);
    assertEquals(0, plan.heldRecords);

    // Not trimmed: the log starts are read, and 2 stays held at its boundary.
    reads.logStarts = at(0, 0, 1, 0, 2, 0);
    TriggerPlanner.Plan held = planner.plan(at(0, 10, 1, 0, 2, 0), reads);
    assertEquals(2, reads.logStartReads);
    assertEquals(at(0, 100, 1, 100, 2, 0), held.capped);
    assertEquals(40, held.heldRecords);
  }

  @Test
  void noLogStartsWhenNothingIsHeld() {
    TriggerPlanner planner = new TriggerPlanner(true);
    Fake reads = new Fake();
    reads.ends = at(0, 100, 1, 100, 2, 40);
    reads.epochs = List.of(ADOPTED, expansion(true, Map.of(0, 50L, 2, 0L)));
    TriggerPlanner.Plan plan = planner.plan(at(0, 60, 1, 0, 2, 0), reads);
    assertEquals(at(0, 100, 1, 100, 2, 40), plan.capped);
    assertEquals(0, reads.logStartReads);
    assertTrue(plan.logStarts.isEmpty());
  }

  @Test
  void aTopicNotAdoptedOrAQueryWithoutZooKeeperIsNotCapped() {
    Fake reads = new Fake();
    reads.ends = at(0, 100, 1, 100, 2, 40);
    reads.epochs = null; // not adopted
    TriggerPlanner.Plan plan = new TriggerPlanner(true).plan(at(0, 0, 1, 0, 2, 0), reads);
    assertEquals(reads.ends, plan.capped);
    assertEquals(0, reads.logStartReads);

    reads.epochs = List.of(ADOPTED, expansion(false, Map.of(2, 0L)));
    plan = new TriggerPlanner(false).plan(at(0, 0, 1, 0, 2, 0), reads);
    assertEquals(reads.ends, plan.capped);
    assertEquals(1, reads.layoutReads); // only the first planner's
  }
}

package org.orderedkafka.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.kafka010.KafkaMicroBatchStream;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.orderedkafka.Json;
import org.orderedkafka.LayoutHistories;
import org.orderedkafka.gate.GatePlanner;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's Kafka micro-batch stream, each batch's end capped at the gates.
 *
 * <p>At every trigger, on the driver:
 *
 * <ol>
 *   <li>Kafka's end offsets, FIRST, through Spark's own reader ({@code latestOffset} of the
 *       wrapped stream with no read limit);
 *   <li>then each topic's layout history after a ZooKeeper {@code sync}
 *       ({@link LayoutHistories}): every record below an end offset read in step 1 was written
 *       before the layout was read, so every epoch it carries is known ("no record outruns its
 *       epoch");
 *   <li>Kafka's log start offsets;
 *   <li>each partition of an adopted topic capped at its first closed gate ({@link
 *       GatePlanner#gateCaps}: the gate rule of {@link org.orderedkafka.gate.GateEvaluator},
 *       with the batch's start, the end of the last logged batch, as the group's progress);
 *   <li>then {@code maxOffsetsPerTrigger} (split over the backlog below the caps, as Spark
 *       splits it) or {@code minOffsetsPerTrigger}/{@code maxTriggerDelay}.
 * </ol>
 *
 * <p>Everything else is the wrapped stream's: initial offsets (and their checkpoint file),
 * offsets' JSON, planning the tasks (with Spark's {@code failOnDataLoss} checks), the
 * executors' reader and the metrics. A topic that is not adopted, or a query without {@code
 * ordered.zookeeper.connect}, is read exactly as Spark's Kafka source reads it.
 */
final class OrderedMicroBatchStream
    implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
  private static final Logger LOG = LoggerFactory.getLogger(OrderedMicroBatchStream.class);

  private final KafkaMicroBatchStream kafka;
  private final Map<String, String> ordered;
  private LayoutHistories layouts;
  private boolean availableNow;
  /** The AvailableNow target (frozen at the first trigger, raised where a gate needs it). */
  private Map<TopicPartition, Long> target;

  private long lastTriggerMillis;
  private long heldRecords;
  private int heldPartitions;
  private String lastLogged;

  OrderedMicroBatchStream(MicroBatchStream kafka, CaseInsensitiveStringMap options) {
    if (!(kafka instanceof KafkaMicroBatchStream)) {
      throw new IllegalStateException(
          "expected Spark's KafkaMicroBatchStream, got " + kafka.getClass().getName());
    }
    this.kafka = (KafkaMicroBatchStream) kafka;
    Map<String, String> checked = OrderedKafkaProvider.checkOrderedOptions(options);
    this.ordered = checked != null && checked.containsKey("ordered.zookeeper.connect") ? checked : null;
  }

  // --- the wrapped stream ---------------------------------------------------------------

  @Override
  public Offset initialOffset() {
    return kafka.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return kafka.deserializeOffset(json);
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return kafka.planInputPartitions(start, end);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return kafka.createReaderFactory();
  }

  @Override
  public void commit(Offset end) {
    kafka.commit(end);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return kafka.getDefaultReadLimit();
  }

  @Override
  public Offset reportLatestOffset() {
    return kafka.reportLatestOffset();
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException(
        "latestOffset(Offset, ReadLimit) should be called instead of this method");
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    Map<String, String> out = new HashMap<>(kafka.metrics(latestConsumedOffset));
    out.put("recordsHeldAtGates", Long.toString(heldRecords));
    out.put("partitionsHeldAtGates", Integer.toString(heldPartitions));
    return out;
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    // Not passed on: the wrapped stream must keep reading Kafka's current end offsets, so
    // that a target below a gate's source boundary can be raised (availableNowTarget).
    availableNow = true;
    target = null;
  }

  @Override
  public void stop() {
    try {
      kafka.stop();
    } finally {
      if (layouts != null) {
        layouts.close();
        layouts = null;
      }
    }
  }

  @Override
  public String toString() {
    return "OrderedMicroBatchStream[" + kafka + "]";
  }

  // --- the gates ------------------------------------------------------------------------

  @Override
  public Offset latestOffset(Offset startOffset, ReadLimit limit) {
    Map<TopicPartition, Long> begin = offsets(startOffset);
    // 1. Kafka's end offsets first (Spark's reader; no limit: the caps come before it).
    Map<TopicPartition, Long> latest = offsets(kafka.latestOffset(startOffset, ReadLimit.allAvailable()));
    Map<String, LayoutHistories.History> histories = new HashMap<>();
    Map<TopicPartition, Long> logStarts = new HashMap<>();
    if (ordered != null) {
      // 2. Then the layouts, after a sync.
      if (layouts == null) {
        layouts = new LayoutHistories(ordered);
      }
      for (String topic : byTopic(latest).keySet()) {
        histories.put(topic, layouts.read(topic));
      }
      // 3. The log starts (trimmed records count as passed).
      if (histories.values().stream().anyMatch(h -> h.adopted)) {
        logStarts.putAll(earliest());
      }
    }
    Map<TopicPartition, Long> goal = latest;
    if (availableNow) {
      goal = availableNowGoal(begin, latest, histories);
    }
    // 4. The caps.
    Map<TopicPartition, Long> capped = new HashMap<>();
    Map<String, Map<Integer, Long>> goalByTopic = byTopic(goal);
    Map<String, Map<Integer, Long>> beginByTopic = byTopic(begin);
    Map<String, Map<Integer, Long>> startsByTopic = byTopic(logStarts);
    for (Map.Entry<String, Map<Integer, Long>> t : goalByTopic.entrySet()) {
      String topic = t.getKey();
      Map<Integer, Long> first = beginByTopic.getOrDefault(topic, Map.of());
      LayoutHistories.History history = histories.get(topic);
      Map<Integer, Long> caps =
          history != null && history.adopted
              ? GatePlanner.gateCaps(
                  history.epochs, first, t.getValue(), startsByTopic.getOrDefault(topic, Map.of()))
              : t.getValue();
      for (Map.Entry<Integer, Long> c : caps.entrySet()) {
        int p = c.getKey();
        long last = t.getValue().get(p);
        Long from = first.get(p);
        // An end below the start (the partition's end went back): left as it is, so that
        // Spark's own planning reports the loss (failOnDataLoss).
        long cap = from != null && last < from ? last : c.getValue();
        capped.put(new TopicPartition(topic, p), cap);
      }
    }
    long held = 0;
    int partitions = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      long over = goal.get(e.getKey()) - e.getValue();
      if (over > 0) {
        held += over;
        partitions++;
      }
    }
    heldRecords = held;
    heldPartitions = partitions;
    // 5. The read limit, below the caps.
    Map<TopicPartition, Long> end = limit(limit, begin, capped, logStarts);
    if (end == null) {
      return startOffset;
    }
    String json = json(end);
    if (held > 0 && !json.equals(lastLogged)) {
      lastLogged = json;
      LOG.info(
          "ordered-kafka: batch ends at {} ({} records of {} partitions held at gates)",
          json, held, partitions);
    }
    return kafka.deserializeOffset(json);
  }

  /** The AvailableNow target, frozen at the first trigger and raised where a gate needs it. */
  private Map<TopicPartition, Long> availableNowGoal(
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> latest,
      Map<String, LayoutHistories.History> histories) {
    if (target == null) {
      target = new HashMap<>(latest);
    }
    Map<String, Map<Integer, Long>> latestByTopic = byTopic(latest);
    Map<String, Map<Integer, Long>> targetByTopic = byTopic(target);
    for (Map.Entry<String, LayoutHistories.History> h : histories.entrySet()) {
      if (!h.getValue().adopted) {
        continue;
      }
      String topic = h.getKey();
      Map<Integer, Long> raised =
          GatePlanner.availableNowTarget(
              h.getValue().epochs,
              targetByTopic.getOrDefault(topic, Map.of()),
              latestByTopic.getOrDefault(topic, Map.of()));
      for (Map.Entry<Integer, Long> r : raised.entrySet()) {
        target.put(new TopicPartition(topic, r.getKey()), r.getValue());
      }
    }
    Map<TopicPartition, Long> goal = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      Long frozen = target.get(e.getKey());
      if (frozen != null) {
        goal.put(e.getKey(), Math.min(e.getValue(), frozen));
      } else if (begin.containsKey(e.getKey())) {
        goal.put(e.getKey(), begin.get(e.getKey()));
      }
      // A partition new since the target was frozen is left for a later run.
    }
    return goal;
  }

  /**
   * The read limit applied to the capped ends; null to skip this trigger (minOffsetsPerTrigger
   * not reached within maxTriggerDelay).
   */
  private Map<TopicPartition, Long> limit(
      ReadLimit limit,
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> capped,
      Map<TopicPartition, Long> logStarts) {
    List<ReadLimit> limits = new ArrayList<>();
    if (limit instanceof CompositeReadLimit) {
      limits.addAll(List.of(((CompositeReadLimit) limit).getReadLimits()));
    } else {
      limits.add(limit);
    }
    ReadMinRows min = null;
    ReadMaxRows max = null;
    for (ReadLimit l : limits) {
      if (l instanceof ReadAllAvailable) {
        return capped;
      } else if (l instanceof ReadMinRows) {
        min = (ReadMinRows) l;
      } else if (l instanceof ReadMaxRows) {
        max = (ReadMaxRows) l;
      }
    }
    if (min != null && !availableNow && delayBatch(min, begin, capped)) {
      return null;
    }
    if (max != null) {
      Map<TopicPartition, Long> starts = logStarts;
      if (!begin.keySet().containsAll(capped.keySet())
          && !logStarts.keySet().containsAll(capped.keySet())) {
        // A partition new to the query starts at its log start, as Spark's split has it.
        starts = earliest();
      }
      return rateLimit(max.maxRows(), begin, capped, starts);
    }
    return capped;
  }

  /** Kafka's log start offsets of the query's partitions (Spark's offset reader). */
  private Map<TopicPartition, Long> earliest() {
    Map<TopicPartition, Long> out = new HashMap<>();
    scala.collection.immutable.Map<TopicPartition, Object> earliest =
        kafka.kafkaOffsetReader().fetchEarliestOffsets();
    // Iterated as pairs: the same source on Scala 2.12 (Spark 3.5) and 2.13 (Spark 4).
    scala.collection.Iterator<scala.Tuple2<TopicPartition, Object>> pairs = earliest.iterator();
    while (pairs.hasNext()) {
      scala.Tuple2<TopicPartition, Object> e = pairs.next();
      out.put(e._1(), ((Number) e._2()).longValue());
    }
    return out;
  }

  private boolean delayBatch(
      ReadMinRows min, Map<TopicPartition, Long> begin, Map<TopicPartition, Long> capped) {
    long now = System.currentTimeMillis();
    if (now - lastTriggerMillis >= min.maxTriggerDelayMs()) {
      lastTriggerMillis = now;
      return false;
    }
    long fresh = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      fresh += e.getValue() - begin.getOrDefault(e.getKey(), 0L);
    }
    if (fresh < min.minRows()) {
      return true;
    }
    lastTriggerMillis = now;
    return false;
  }

  /**
   * Spark's {@code maxOffsetsPerTrigger} split, over the backlog below the caps: in proportion
   * to each partition's backlog, rounded down, or up to 1 below 1 (no partition starves);
   * never past the cap. A partition new to the query starts at its log start.
   */
  static Map<TopicPartition, Long> rateLimit(
      long limit,
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> capped,
      Map<TopicPartition, Long> logStarts) {
    Map<TopicPartition, Long> sizes = new HashMap<>();
    double total = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      long first = begin.getOrDefault(e.getKey(), logStarts.getOrDefault(e.getKey(), 0L));
      long size = e.getValue() - first;
      if (size > 0) {
        sizes.put(e.getKey(), size);
        total += size;
      }
    }
    if (total < 1) {
      return capped;
    }
    Map<TopicPartition, Long> out = new HashMap<>(capped);
    for (Map.Entry<TopicPartition, Long> e : sizes.entrySet()) {
      long first = begin.getOrDefault(e.getKey(), logStarts.getOrDefault(e.getKey(), 0L));
      double prorate = limit * (e.getValue() / total);
      long share = (long) (prorate < 1 ? Math.ceil(prorate) : Math.floor(prorate));
      long off = share > Long.MAX_VALUE - first ? Long.MAX_VALUE : first + share;
      out.put(e.getKey(), Math.min(capped.get(e.getKey()), off));
    }
    return out;
  }

  // --- offsets as Spark's Kafka JSON --------------------------------------------------------

  static Map<TopicPartition, Long> offsets(Offset offset) {
    Map<TopicPartition, Long> out = new HashMap<>();
    Object parsed = Json.parse(offset.json());
    for (Map.Entry<?, ?> t : ((Map<?, ?>) parsed).entrySet()) {
      String topic = (String) t.getKey();
      for (Map.Entry<?, ?> p : ((Map<?, ?>) t.getValue()).entrySet()) {
        out.put(
            new TopicPartition(topic, Integer.parseInt((String) p.getKey())),
            ((Number) p.getValue()).longValue());
      }
    }
    return out;
  }

  static String json(Map<TopicPartition, Long> offsets) {
    Map<String, Object> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
      @SuppressWarnings("unchecked")
      Map<String, Object> parts =
          (Map<String, Object>) out.computeIfAbsent(e.getKey().topic(), t -> new LinkedHashMap<>());
      parts.put(Integer.toString(e.getKey().partition()), e.getValue());
    }
    return Json.write(out);
  }

  static Map<String, Map<Integer, Long>> byTopic(Map<TopicPartition, Long> offsets) {
    Map<String, Map<Integer, Long>> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
      out.computeIfAbsent(e.getKey().topic(), t -> new TreeMap<>())
          .put(e.getKey().partition(), e.getValue());
    }
    return out;
  }
}

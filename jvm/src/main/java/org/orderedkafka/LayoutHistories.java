package org.orderedkafka;

import java.io.Closeable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.kafka.common.KafkaException;
import org.apache.zookeeper.KeeperException;
import org.orderedkafka.gate.EpochInfo;

/**
 * Reads topics' layout histories (the topic record and its epochs) for readers that gate:
 * the JVM Spark source's planner. Each read starts with a ZooKeeper {@code sync} of the topic's
 * path, so it sees every write that completed before the read began: a record below an end
 * offset read earlier carries an epoch this read knows (Python's {@code load_history} with
 * {@code sync=True}). Sealed epochs are read once and kept (a sealed epoch never changes).
 *
 * <p>Uses the JVM's shared ZooKeeper session ({@link ZkSession}) for the settings' connect
 * string and credentials. Not thread-safe.
 */
public final class LayoutHistories implements Closeable {
  /** A topic's layout as the gates need it. */
  public static final class History {
    public final String topic;
    /** Whether the topic is adopted and routed by its layout. */
    public final boolean adopted;

    public final List<EpochInfo> epochs;
    /**
     * The topic znode's last-write zxid as read <em>before</em> the {@code sync} (-1: no node):
     * a later {@code exists} that answers another one means the history changed since.
     */
    public final long mzxid;
    /** Whether the topic record says the topic is compacted (tombstone copies to pass over). */
    public final boolean compacted;
    /** The Kafka topic id the topic record is bound to (null: unbound, or not adopted). */
    public final String topicId;
    /** The topic record's initial partition count and hash algorithm (the audit routes keys). */
    public final int initial;

    public final String algorithm;

    History(String topic, boolean adopted, List<EpochInfo> epochs) {
      this(topic, adopted, epochs, -1, false);
    }

    public History(
        String topic, boolean adopted, List<EpochInfo> epochs, long mzxid, boolean compacted) {
      this(topic, adopted, epochs, mzxid, compacted, null, 0, "murmur3");
    }

    public History(
        String topic,
        boolean adopted,
        List<EpochInfo> epochs,
        long mzxid,
        boolean compacted,
        String topicId,
        int initial,
        String algorithm) {
      this.topicId = topicId;
      this.initial = initial;
      this.algorithm = algorithm;
      this.topic = topic;
      this.adopted = adopted;
      this.epochs = Collections.unmodifiableList(epochs);
      this.mzxid = mzxid;
      this.compacted = compacted;
    }

    @Override
    public String toString() {
      return "History(" + topic + (adopted ? " adopted " + epochs : " plain") + ")";
    }
  }

  private static final long SYNC_TIMEOUT_MS = 30_000;

  private final OrderedSettings settings;
  private final ZkSession zk;
  /** Per topic; one topic is read by one thread at a time, topics from several (a prefetch). */
  private final Map<String, Map<Long, EpochInfo>> sealed =
      new java.util.concurrent.ConcurrentHashMap<>();
  private boolean closed;

  /**
   * Open (or share) the ZooKeeper session named by {@code ordered.zookeeper.*} settings.
   *
   * @param config the reader's options; only the {@code ordered.zookeeper.*} keys are read
   * @throws org.apache.kafka.common.config.ConfigException a missing or malformed setting
   * @throws KafkaException ZooKeeper could not be reached
   */
  public LayoutHistories(Map<String, ?> config) {
    Map<String, Object> zkConfig = new HashMap<>();
    for (Map.Entry<String, ?> e : config.entrySet()) {
      if (e.getKey().startsWith("ordered.zookeeper.")) {
        zkConfig.put(e.getKey(), e.getValue());
      }
    }
    settings = OrderedSettings.parse(zkConfig, LayoutHistories.class.getName());
    zk = ZkSession.acquire(settings);
  }

  /** Share the session of a consumer's checked settings. */
  LayoutHistories(OrderedSettings settings) {
    this.settings = settings;
    zk = ZkSession.acquire(settings);
  }

  ZkSession session() {
    return zk;
  }

  /**
   * Read {@code topic}'s history after a {@code sync}.
   *
   * @throws KafkaException ZooKeeper failed, or a record fails its check
   */
  public History read(String topic) {
    CuratorFramework client = zk.client;
    String path = Records.topicPath(settings.root, topic);
    try {
      // The change signal is read before the sync (C-COPY-2): read after the history, a
      // write in between would go unnoticed by the next check.
      org.apache.zookeeper.data.Stat before = client.checkExists().forPath(path);
      long mzxid = before == null ? -1 : before.getMzxid();
      sync(client, path);
      byte[] data;
      try {
        data = client.getData().forPath(path);
      } catch (KeeperException.NoNodeException absent) {
        return new History(topic, false, List.of(), mzxid, false);
      }
      Records.TopicRecord record = Records.TopicRecord.parse(data, path);
      if (record == null || !record.ordered) {
        return new History(topic, false, List.of(), mzxid, false);
      }
      String parent = path + "/epochs";
      List<String> names;
      try {
        names = new ArrayList<>(client.getChildren().forPath(parent));
      } catch (KeeperException.NoNodeException none) {
        names = new ArrayList<>();
      }
      Collections.sort(names);
      Map<Long, EpochInfo> known = sealed.computeIfAbsent(topic, t -> new HashMap<>());
      Map<Long, EpochInfo> kept = new HashMap<>();
      List<EpochInfo> epochs = new ArrayList<>();
      for (String name : names) {
        if (name.length() != 10 || !name.chars().allMatch(Character::isDigit)) {
          throw new Records.CorruptRecordException(parent + "/" + name + ": not an epoch node name");
        }
        long number = Long.parseLong(name);
        EpochInfo info = known.get(number);
        if (info == null) {
          String epochPath = Records.epochPath(settings.root, topic, number);
          byte[] raw;
          try {
            raw = client.getData().forPath(epochPath);
          } catch (KeeperException.NoNodeException dropped) {
            continue; // dropped between the listing and the read
          }
          info = parseEpoch(raw, epochPath, number);
        }
        if (info.sealed) {
          kept.put(number, info);
        }
        epochs.add(info);
      }
      sealed.put(topic, kept);
      return new History(
          topic, true, epochs, mzxid, record.compacted, record.topicId, record.initial,
          record.algorithm);
    } catch (KafkaException | Records.CorruptRecordException e) {
      throw e;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KafkaException("interrupted reading the layout of " + topic, e);
    } catch (Exception e) {
      throw new KafkaException(
          "reading the layout of " + topic + " from ZooKeeper (" + settings.zookeeperConnect
              + "): " + e,
          e);
    }
  }

  static EpochInfo parseEpoch(byte[] data, String path, long number) {
    Object parsed;
    try {
      parsed = Json.parse(new String(data, StandardCharsets.UTF_8));
    } catch (RuntimeException e) {
      throw new Records.CorruptRecordException(path + ": not JSON: " + e.getMessage());
    }
    if (!(parsed instanceof Map)) {
      throw new Records.CorruptRecordException(path + ": not a JSON object");
    }
    @SuppressWarnings("unchecked")
    Map<String, Object> m = (Map<String, Object>) parsed;
    EpochInfo info;
    try {
      Object state = m.get("state");
      if (!"sealed".equals(state) && !"pending".equals(state)) {
        throw new IllegalArgumentException("state: expected pending or sealed, got " + state);
      }
      info = EpochInfo.fromJson(m);
    } catch (RuntimeException e) {
      throw new Records.CorruptRecordException(path + ": " + e.getMessage());
    }
    if (info.epoch != number) {
      throw new Records.CorruptRecordException(
          path + ": holds epoch " + info.epoch + ", not " + number);
    }
    return info;
  }

  private static void sync(CuratorFramework client, String path) throws Exception {
    CountDownLatch done = new CountDownLatch(1);
    client.sync().inBackground((c, event) -> done.countDown()).forPath(path);
    if (!done.await(SYNC_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
      throw new KafkaException("ZooKeeper sync of " + path + " did not answer in 30 s");
    }
  }

  /** Release the shared session (the last user closes it). */
  @Override
  public void close() {
    if (!closed) {
      closed = true;
      zk.release();
    }
  }
}

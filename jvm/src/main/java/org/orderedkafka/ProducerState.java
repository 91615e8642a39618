package org.orderedkafka;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.data.Stat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One producer's part of the protocol (docs/protocol.md, "The producer"): the state both
 * plugins of one {@code KafkaProducer} share. Python's {@code OrderedProducer} does the
 * same steps; the JVM differences are named where they are.
 *
 * <ol>
 *   <li><b>First use of a topic</b> (in {@code partition()}, on the sending thread): check
 *       the stored layout's topic id against the id in the producer's own metadata
 *       ({@code Cluster.topicId}, which kafka-clients fills from its metadata responses; an
 *       unknown id, {@code Uuid.ZERO_UUID}, skips the check), register the ephemeral
 *       {@code ProducerRecord} v2 ({@code "language": "java"}), then read the topic record
 *       with a one-shot {@code exists} watch and check its topic id again. Not adopted or
 *       {@code ordered: false}: Kafka's own routing.
 *   <li><b>Routing</b> by the layout ({@link TopicState}); a new record from a watch is read
 *       and applied by the session's worker, which re-arms the watch.
 *   <li><b>A pending epoch</b>: the route is replaced at once and the switch drains in pause
 *       mode ({@link TopicState}); the ack ({@code AckRecord}, with the highest offset
 *       acknowledged per partition since the previous ack: every one of them was routed
 *       under an older epoch) is written by the worker, in one transaction with a write of
 *       the registration, which proves it (docs/security.md, {@link #writeAck}).
 *   <li><b>Sessions</b>: see {@link ZkSession}; while the session is not usable, keyed
 *       records to ordered topics are refused ({@link LayoutUnavailableException}).
 *   <li><b>Leaving</b> ({@link #close}, from the plugins' {@code close()}, which
 *       {@code KafkaProducer.close()} calls after its I/O thread ended, so every record has
 *       been acknowledged): ack every open switch and every pending epoch (when every record
 *       was acknowledged and none was aborted by a forced close), then delete the
 *       registrations. Under ZooKeeper ACLs a producer may not delete a registration; the
 *       shared session then keeps acking that registration's epochs (it has nothing in
 *       flight) until the session ends ({@link ZkSession#keepAcking}).
 * </ol>
 */
final class ProducerState {
  private static final Logger LOG = LoggerFactory.getLogger(ProducerState.class);
  private static final ThreadLocal<ProducerState> PENDING = new ThreadLocal<>();
  /** Every producer state not closed yet (introspection for tests and operations). */
  static final java.util.Set<ProducerState> LIVE = ConcurrentHashMap.newKeySet();
  static final long LEAVE_MS = 3_000;

  final String id;
  final OrderedSettings settings;
  final ZkSession zk;
  final String root;
  private final CuratorFramework client;
  private final String host;
  private final ConcurrentHashMap<String, TopicState> topics = new ConcurrentHashMap<>();
  private final Map<String, Watcher> watchers = new ConcurrentHashMap<>();
  private final Object firstUseLock = new Object();
  private final String firstHalf;
  private volatile boolean paired;
  private volatile boolean closed;

  private ProducerState(OrderedSettings settings, String firstHalf) {
    this.settings = settings;
    this.firstHalf = firstHalf;
    this.root = settings.root;
    this.host = hostName();
    this.id = producerId(host);
    this.zk = ZkSession.acquire(settings);
    this.client = zk.client;
    zk.add(this);
    LIVE.add(this);
  }

  /**
   * The shared state of the plugin pair being configured on this thread: kafka-clients
   * configures the partitioner and then the interceptors, on the constructor's thread and
   * with the same {@code client.id}, so the first half leaves its state here for the second.
   *
   * @throws org.apache.kafka.common.config.ConfigException a bad setting (same wording as Python)
   * @throws org.apache.kafka.common.KafkaException ZooKeeper unreachable at the first producer
   */
  static ProducerState pair(Map<String, ?> config, String self) {
    OrderedSettings settings = OrderedSettings.parse(config, self);
    ProducerState waiting = PENDING.get();
    if (waiting != null
        && !waiting.closed
        && !waiting.firstHalf.equals(self)
        && waiting.settings.clientId.equals(settings.clientId)
        && waiting.settings.sessionKey().equals(settings.sessionKey())
        && waiting.root.equals(settings.root)) {
      PENDING.remove();
      waiting.paired = true;
      return waiting;
    }
    ProducerState state = new ProducerState(settings, self);
    PENDING.set(state);
    return state;
  }

  static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (Exception exc) {
      return "localhost";
    }
  }

  /** {@code p-{host}-{pid}-{16 hex}}, as Python's {@code coordinator.identity.producer_id}. */
  static String producerId(String host) {
    String h = host.length() > 63 ? host.substring(0, 63) : host;
    h = h.replaceAll("[^A-Za-z0-9._-]", "_");
    long random = ThreadLocalRandom.current().nextLong();
    return "p-" + h + "-" + ProcessHandle.current().pid() + "-" + String.format("%016x", random);
  }

  TopicState topic(String name) {
    TopicState t = topics.get(name);
    if (t == null) {
      t = topics.computeIfAbsent(name, n -> new TopicState(n, settings.batchSize, this::queueAck));
    }
    return t;
  }

  /** The state of {@code topic}, or null if this producer never met it (tests, introspection). */
  TopicState find(String topic) {
    return topics.get(topic);
  }

  // --- the send path ----------------------------------------------------------------------

  void onSend(String topic) {
    topic(topic).sent();
  }

  void onAck(String topic, int partition, long offset, Exception exception) {
    TopicState t = topics.get(topic);
    if (t != null) {
      t.acked(partition, offset, exception);
    }
  }

  int partition(String topic, byte[] key, int size, Cluster cluster) {
    if (!paired) {
      throw new OrderedLayoutException(
          "OrderedPartitioner was configured without its OrderedProducerInterceptor (set "
              + "interceptor.classes on the same producer): records cannot be routed");
    }
    if (closed) {
      throw new IllegalStateException("the ordered producer plugins are closed");
    }
    TopicState t = topic(topic);
    if (t.state() == TopicState.State.UNKNOWN) {
      firstUse(t, cluster);
    }
    try {
      return t.partition(key, size, cluster, settings.maxBlockMs);
    } catch (InterruptedException exc) {
      throw new InterruptException(exc);
    }
  }

  void newBatch(String topic, int previous) {
    TopicState t = topics.get(topic);
    if (t != null) {
      t.newBatch(previous);
    }
  }

  // --- first use, registration, reads -------------------------------------------------------

  private void firstUse(TopicState t, Cluster cluster) {
    synchronized (firstUseLock) {
      if (t.state() != TopicState.State.UNKNOWN) {
        return;
      }
      if (!t.valid) {
        t.apply(null, () -> true); // not a Kafka topic name: Kafka reports its own error
        return;
      }
      if (!zk.usable()) {
        throw new LayoutUnavailableException(
            "cannot read the layout of " + t.topic + ": ZooKeeper is unreachable; retry");
      }
      long generation = zk.generation();
      try {
        // A layout of another topic id is refused before registering: a refused producer
        // must not hold up that topic's barrier.
        checkTopicId(read(t, false), cluster);
        register(t);
        Records.TopicRecord record = checkTopicId(read(t, true), cluster);
        if (zk.generation() != generation) {
          throw new LayoutUnavailableException(
              "the ZooKeeper session changed while reading the layout of " + t.topic + "; retry");
        }
        t.apply(record, zk::usable);
      } catch (LayoutUnavailableException | OrderedLayoutException exc) {
        throw exc;
      } catch (KeeperException.NoAuthException exc) {
        throw new OrderedLayoutException(noAuth("register in", t.topic), exc);
      } catch (Records.CorruptRecordException exc) {
        throw new OrderedLayoutException(exc.getMessage(), exc);
      } catch (Exception exc) {
        throw new LayoutUnavailableException(
            "cannot read the layout of " + t.topic + ": " + exc + "; retry", exc);
      }
    }
  }

  private String noAuth(String what, String topic) {
    return "NoAuth: ZooKeeper refused to " + what + " " + Records.producersPath(root, topic)
        + " as " + settings.principal() + " (this identity lacks the permission)";
  }

  private Records.TopicRecord checkTopicId(Records.TopicRecord record, Cluster cluster) {
    if (record == null || record.topicId == null || cluster == null) {
      return record;
    }
    Uuid kafka = cluster.topicId(record.topic);
    if (kafka == null || Uuid.ZERO_UUID.equals(kafka)) {
      return record; // this metadata carries no id for the topic: nothing to check against
    }
    // Kafka's Uuid prints URL-safe base64 ('-', '_'); the Python side stores librdkafka's
    // standard base64 ('+', '/'): the same id in two alphabets.
    if (!kafka.toString().equals(record.topicId.replace('+', '-').replace('/', '_'))) {
      throw OrderedLayoutException.topicIdMismatch(record.topic, record.topicId, kafka.toString());
    }
    return record;
  }

  /**
   * Register for the topic (ephemeral). Under ACLs a producer may not create a topic's
   * node: a topic nobody adopted routes plain, and a re-read after adoption registers.
   */
  private void register(TopicState t) throws Exception {
    String path = Records.producerPath(root, t.topic, id);
    long session = zk.sessionId();
    byte[] data =
        Records.producerRecord(
            id, host, ProcessHandle.current().pid(), settings.deliveryTimeoutMs, Records.now(), settings.clientId);
    try {
      client.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL).forPath(path, data);
    } catch (KeeperException.NodeExistsException exists) {
      Stat stat = client.checkExists().forPath(path);
      if (stat != null && stat.getEphemeralOwner() != session) {
        throw new OrderedLayoutException(path + ": producer id " + id + " is registered by another session");
      }
    } catch (KeeperException.NoAuthException refused) {
      if (read(t, false) != null) {
        throw refused;
      }
      if (!t.refused) {
        LOG.info("{}: not adopted and not creatable under ACLs: routing plain", t.topic);
      }
      t.refused = true;
      t.registeredSession = 0;
      return;
    }
    t.refused = false;
    t.registeredSession = session;
  }

  private Records.TopicRecord read(TopicState t, boolean watch) throws Exception {
    String path = Records.topicPath(root, t.topic);
    Stat stat =
        watch
            ? client.checkExists().usingWatcher(watcher(t)).forPath(path)
            : client.checkExists().forPath(path);
    if (stat == null) {
      return null;
    }
    byte[] data;
    try {
      data = client.getData().forPath(path);
    } catch (KeeperException.NoNodeException gone) {
      return null;
    }
    return Records.TopicRecord.parse(data, path);
  }

  private Watcher watcher(TopicState t) {
    // One object per topic: ZooKeeper keeps a set of watchers per path, so re-arming with
    // the same one never piles up duplicates. ZooKeeper's event thread: never block.
    return watchers.computeIfAbsent(t.topic, n -> event -> zk.submit(() -> reread(t)));
  }

  /** The worker: a watch fired (or a retry). */
  private void reread(TopicState t) {
    if (closed || !zk.usable()) {
      return; // the re-synchronisation reads every topic
    }
    try {
      if (t.refused) {
        register(t); // the topic's node may exist now
      }
      t.apply(read(t, true), zk::usable);
    } catch (Records.CorruptRecordException exc) {
      LOG.warn("{}: keeping the current route: {}", t.topic, exc.getMessage());
    } catch (Exception exc) {
      LOG.info("reading {} failed ({}); retrying", t.topic, exc.toString());
      zk.schedule(() -> reread(t), ZkSession.RETRY_MS);
    }
  }

  // --- the session ---------------------------------------------------------------------------

  void suspend() {
    for (TopicState t : topics.values()) {
      t.suspend();
    }
  }

  /**
   * The worker, after a reconnect: re-register (a new session lost the ephemeral nodes),
   * re-read and re-watch every topic in use; return what applies the records once the
   * session is declared usable.
   */
  List<Runnable> resync(long session) throws Exception {
    List<Runnable> out = new ArrayList<>();
    if (closed) {
      return out;
    }
    for (TopicState t : topics.values()) {
      if (!t.valid || t.state() == TopicState.State.UNKNOWN) {
        continue;
      }
      if (t.registeredSession != session) {
        register(t); // a new session: the old one's ephemeral registration is gone
      }
      Records.TopicRecord record = read(t, true);
      out.add(() -> t.apply(record, zk::usable));
    }
    return out;
  }

  // --- acks -----------------------------------------------------------------------------------

  /** Hand an ack to the worker (any thread, under a topic's monitor too: never blocks). */
  void queueAck(TopicState.AckDue due) {
    zk.submit(() -> writeAckRetrying(due));
  }

  private void writeAckRetrying(TopicState.AckDue due) {
    // Written even when close() began meanwhile: an ack drained by the producer's final
    // flush is queued just before the plugins close, and it carries the last offsets.
    try {
      writeAck(due);
    } catch (KeeperException.ConnectionLossException | KeeperException.SessionExpiredException exc) {
      if (closed) {
        return; // leaving acks what is pending itself, or the session is going
      }
      LOG.info("ack of epoch {} of {} failed ({}); retrying", due.epoch, due.topic, exc.toString());
      zk.schedule(() -> writeAckRetrying(due), ZkSession.RETRY_MS);
    } catch (Exception exc) {
      LOG.warn("ack of epoch {} of {} dropped: {}", due.epoch, due.topic, exc.toString());
    }
  }

  /**
   * Write an ack and prove it: one transaction creates {@code acks/{id}} and writes the
   * registration back unchanged, so both get one zxid ({@code coordinator/kernel/store/ack_proof.py}
   * {@code write_ack}; docs/security.md). An existing ack node (an earlier try, or a forged
   * one) is proven by writing the registration alone. Idempotent.
   */
  void writeAck(TopicState.AckDue due) throws Exception {
    writeAck(client, root, due.topic, id, due.epoch, Records.ackRecord(id, due.epoch, due.lastOffsets, Records.now()));
    LOG.debug("{}: acked epoch {} as {}", due.topic, due.epoch, id);
  }

  static void writeAck(CuratorFramework client, String root, String topic, String id, long epoch, byte[] data)
      throws Exception {
    String path = Records.ackPath(root, topic, epoch, id);
    String reg = Records.producerPath(root, topic, id);
    for (int i = 0; i < 5; i++) {
      Stat stat = new Stat();
      byte[] regData;
      try {
        regData = client.getData().storingStatIn(stat).forPath(reg);
      } catch (KeeperException.NoNodeException gone) {
        regData = null;
      }
      try {
        if (regData == null) {
          client.create().forPath(path, data);
          return;
        }
        client
            .transaction()
            .forOperations(
                client.transactionOp().create().forPath(path, data),
                client.transactionOp().setData().withVersion(stat.getVersion()).forPath(reg, regData));
        return;
      } catch (KeeperException.NodeExistsException exists) {
        if (regData == null) {
          return;
        }
        try {
          client.setData().withVersion(stat.getVersion()).forPath(reg, regData);
          return;
        } catch (KeeperException.BadVersionException | KeeperException.NoNodeException again) {
          continue;
        }
      } catch (KeeperException.BadVersionException again) {
        continue; // the registration changed meanwhile: read it again
      } catch (KeeperException.NoNodeException missing) {
        if (client.checkExists().forPath(Records.acksPath(root, topic, epoch)) == null) {
          throw new IllegalStateException(
              Records.acksPath(root, topic, epoch) + ": epoch " + epoch + " of " + topic + " was never published");
        }
        continue; // the registration went away meanwhile
      }
    }
    throw new IllegalStateException(path + ": the registration " + reg + " kept changing while acking");
  }

  // --- leaving ----------------------------------------------------------------------------------

  /**
   * Leave (from the first plugin's {@code close()}; every record is acknowledged by then).
   * Bounded: the ZooKeeper part runs on the worker and is waited for at most 3 s.
   */
  void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    if (PENDING.get() == this) {
      PENDING.remove();
    }
    zk.remove(this);
    LIVE.remove(this);
    try {
      Future<?> left = zk.worker.submit(this::leave);
      left.get(LEAVE_MS, TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.TimeoutException exc) {
      LOG.warn("leaving the layout store timed out after {} s", LEAVE_MS / 1000);
    } catch (InterruptedException exc) {
      Thread.currentThread().interrupt();
    } catch (Exception exc) {
      LOG.warn("leaving the layout store incompletely: {}", exc.toString());
    } finally {
      zk.release();
    }
  }

  private void leave() {
    if (!zk.usable()) {
      LOG.warn("leaving without acks: the ZooKeeper session is not usable (the barrier waits out this producer's delivery timeout)");
      return;
    }
    List<TopicState> used = new ArrayList<>();
    for (TopicState t : topics.values()) {
      if (t.valid && t.state() != TopicState.State.UNKNOWN) {
        used.add(t);
      }
    }
    try {
      for (TopicState t : used) {
        TopicState.AckDue due = t.closeSwitch();
        if (due != null && t.clean()) {
          writeAck(due);
        }
      }
      for (TopicState t : used) {
        if (t.registeredSession == 0) {
          continue;
        }
        try {
          client.delete().forPath(Records.producerPath(root, t.topic, id));
        } catch (KeeperException.NoNodeException gone) {
          // gone already
        } catch (KeeperException.NoAuthException refused) {
          // Under ACLs producers may not delete registrations: this one lives as long as
          // the shared session, so the session acks its epochs (nothing is in flight).
          zk.keepAcking(root, t.topic, id);
        }
      }
      for (TopicState t : used) {
        if (!t.clean()) {
          LOG.warn("{}: not acking at close: a record was aborted by a forced close", t.topic);
          continue;
        }
        Records.TopicRecord record = read(t, false);
        if (record != null && record.pending >= 0) {
          // After the I/O thread ended nothing is in flight: the ack is true. It covers an
          // epoch published while leaving, which may have listed this producer.
          writeAck(new TopicState.AckDue(t.topic, record.pending, Map.of()));
        }
      }
    } catch (Exception exc) {
      LOG.warn("leaving the layout store incompletely: {}", exc.toString());
    }
  }

  boolean closed() {
    return closed;
  }
}

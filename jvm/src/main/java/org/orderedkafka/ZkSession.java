package org.orderedkafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.BoundedExponentialBackoffRetry;
import org.apache.kafka.common.KafkaException;
import org.apache.zookeeper.ClientCnxnSocketNetty;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.client.ZKClientConfig;
import org.apache.zookeeper.common.ClientX509Util;
import org.apache.zookeeper.data.Stat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one ZooKeeper session of this JVM (per connect string and credentials), shared by
 * every producer that uses the plugins: Flink and Spark make many producers, and each
 * session costs ZooKeeper a connection and its pings. Reference-counted: made by the
 * first producer's {@code configure()}, closed when the last producer closes.
 *
 * <p>The session's settings (session timeout, credentials) are those of the first
 * producer for a connect string and credentials; producers with other credentials get a
 * session of their own.
 *
 * <p>It is a Curator client (relocated in the jar) with bounded retries (3 tries, 100 ms to
 * 1 s apart) for every call, ZooKeeper digest authentication ({@code ordered.zookeeper.auth}),
 * TLS when {@code ordered.zookeeper.ssl.client.enable} is true ({@link #tlsConfig})
 * and the ACL rules of the roots' policies ({@link AclRules}). Its one worker thread does
 * every ZooKeeper call that is not a first use: re-reads after a watch fires (one-shot
 * {@code exists} watches re-armed by every re-read, as Python's producer), acks, and the
 * re-synchronisation after a reconnect.
 *
 * <p>Session states: Curator's {@code SUSPENDED}/{@code LOST} (or read-only) make the
 * session unusable at once, and every producer suspends its routed topics (keyed records
 * are refused). {@code CONNECTED}/{@code RECONNECTED} start a re-synchronisation: every
 * producer re-registers if the session changed (a lost session takes the ephemeral
 * registrations with it), re-reads and re-watches each topic; only when all of it
 * succeeded, with no session change meanwhile (a generation count), is the session usable
 * again and the records applied.
 */
final class ZkSession {
  private static final Logger LOG = LoggerFactory.getLogger(ZkSession.class);
  private static final Map<String, ZkSession> SESSIONS = new HashMap<>();
  static final long RETRY_MS = 200;

  final String key;
  final CuratorFramework client;
  final AclRules acl = new AclRules();
  final ScheduledExecutorService worker;
  final String principal;
  private final boolean tls;
  private final String connectString;
  private final Set<ProducerState> producers = ConcurrentHashMap.newKeySet();
  private final Set<String> roots = ConcurrentHashMap.newKeySet();
  private final AtomicLong generation = new AtomicLong();
  private volatile boolean usable;
  private int refs;
  /** Root NUL topic -> ids of closed producers whose registration ACLs kept (see keepAcking). */
  private final Map<String, Set<String>> left = new ConcurrentHashMap<>();
  private final Map<String, org.apache.zookeeper.Watcher> leftWatchers = new ConcurrentHashMap<>();
  private volatile long lastSession;

  private ZkSession(OrderedSettings s) {
    key = s.sessionKey();
    principal = s.principal();
    CuratorFrameworkFactory.Builder builder =
        CuratorFrameworkFactory.builder()
            .connectString(s.zookeeperConnect)
            .sessionTimeoutMs(s.sessionTimeoutMs)
            .connectionTimeoutMs(Math.min(s.sessionTimeoutMs, 15_000))
            .retryPolicy(new BoundedExponentialBackoffRetry(100, 1000, 3))
            .aclProvider(acl)
            .ensembleTracker(false);
    byte[] auth = s.digestAuth();
    if (auth != null) {
      builder.authorization("digest", auth);
    }
    if (s.tls) {
      builder.zkClientConfig(tlsConfig(s));
    }
    tls = s.tls;
    connectString = s.zookeeperConnect;
    client = builder.build();
    worker =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "ordered-zookeeper-worker");
              t.setDaemon(true);
              return t;
            });
  }

  /**
   * The shared session for these settings, started (and connected) if new.
   *
   * @throws KafkaException ZooKeeper could not be reached within {@code max(session timeout, 10 s)}
   */
  static ZkSession acquire(OrderedSettings s) {
    synchronized (SESSIONS) {
      ZkSession z = SESSIONS.get(s.sessionKey());
      if (z == null) {
        z = new ZkSession(s);
        z.start(Math.max(s.sessionTimeoutMs, 10_000));
        SESSIONS.put(z.key, z);
      }
      z.refs++;
      z.watchPolicy(s.root);
      return z;
    }
  }

  /** How many sessions this JVM holds now (tests). */
  static int open() {
    synchronized (SESSIONS) {
      return SESSIONS.size();
    }
  }

  private void start(long timeoutMs) {
    client.getConnectionStateListenable().addListener((c, state) -> onState(state));
    client.start();
    boolean connected;
    try {
      connected = client.blockUntilConnected((int) timeoutMs, TimeUnit.MILLISECONDS);
    } catch (InterruptedException exc) {
      Thread.currentThread().interrupt();
      connected = false;
    }
    if (!connected) {
      client.close();
      worker.shutdownNow();
      throw new KafkaException(
          "ordered.zookeeper.connect: ZooKeeper could not be reached within " + timeoutMs / 1000
              + " s"
              + (tls
                  ? " over TLS (check that this is ZooKeeper's secureClientPort and that "
                      + OrderedSettings.SSL_CA + " signed its certificate)"
                  : plainHint(connectString)));
    }
    usable = true;
    lastSession = sessionId();
  }

  /** Drop one reference; the last one closes the session (its ephemeral registrations go with it). */
  void release() {
    synchronized (SESSIONS) {
      if (--refs > 0) {
        return;
      }
      SESSIONS.remove(key);
    }
    worker.shutdown();
    try {
      worker.awaitTermination(3, TimeUnit.SECONDS);
    } catch (InterruptedException exc) {
      Thread.currentThread().interrupt();
    }
    worker.shutdownNow();
    client.close();
  }

  boolean usable() {
    return usable;
  }

  long generation() {
    return generation.get();
  }

  /**
   * Why a plain client got no session from a server that took its connection: it may take
   * TLS only and drop plain clients. Empty when the first host refuses connections (away).
   */
  static String plainHint(String connect) {
    String first = connect.split("/", 2)[0].split(",")[0].trim();
    int colon = first.lastIndexOf(':');
    String host = first;
    int port = 2181;
    if (colon > first.lastIndexOf(']')) {
      host = first.substring(0, colon);
      try {
        port = Integer.parseInt(first.substring(colon + 1));
      } catch (NumberFormatException exc) {
        return "";
      }
    }
    host = host.replace("[", "").replace("]", "");
    try (java.net.Socket probe = new java.net.Socket()) {
      probe.connect(new java.net.InetSocketAddress(host, port), 2_000);
    } catch (java.io.IOException exc) {
      return "";
    }
    return " (" + first + " takes connections but gave no session: a ZooKeeper that takes TLS"
        + " only drops plain clients; then set " + OrderedSettings.SSL_ENABLE + "=true and "
        + OrderedSettings.SSL_CA + ")";
  }

  /**
   * ZooKeeper's client TLS ({@code ordered.zookeeper.ssl.*}): the Netty socket (the NIO one
   * has no TLS), the PEM CA as its trust store (ZooKeeper 3.5.7+), host name verification.
   */
  static ZKClientConfig tlsConfig(OrderedSettings s) {
    ZKClientConfig config = new ZKClientConfig();
    config.setProperty(ZKClientConfig.SECURE_CLIENT, "true");
    // The relocated class name in the jar: the name is looked up by reflection.
    config.setProperty(ZKClientConfig.ZOOKEEPER_CLIENT_CNXN_SOCKET, ClientCnxnSocketNetty.class.getName());
    try (ClientX509Util x509 = new ClientX509Util()) {
      if (!s.tlsCa.isEmpty()) {
        config.setProperty(x509.getSslTruststoreLocationProperty(), s.tlsCa);
        config.setProperty(x509.getSslTruststoreTypeProperty(), "PEM");
      }
      config.setProperty(
          x509.getSslHostnameVerificationEnabledProperty(), String.valueOf(s.tlsHostnameCheck));
    }
    return config;
  }

  /** This session's id (what the ephemeral registrations belong to), or 0 while not connected. */
  long sessionId() {
    try {
      return client.getZookeeperClient().getZooKeeper().getSessionId();
    } catch (Exception exc) {
      return 0;
    }
  }

  void add(ProducerState p) {
    producers.add(p);
  }

  void remove(ProducerState p) {
    producers.remove(p);
  }

  // --- the session's states -----------------------------------------------------------

  private void onState(ConnectionState state) {
    long gen = generation.incrementAndGet();
    switch (state) {
      case CONNECTED:
      case RECONNECTED:
        LOG.info("ZooKeeper session {} ({}): re-synchronising", state, principal);
        submit(() -> resync(gen));
        break;
      default:
        usable = false;
        LOG.warn("ZooKeeper session {}: keyed records to ordered topics are refused until it is back", state);
        for (ProducerState p : producers) {
          p.suspend();
        }
    }
  }

  private void resync(long gen) {
    if (gen != generation.get()) {
      return;
    }
    List<Runnable> applies = new ArrayList<>();
    try {
      for (String root : roots) {
        loadPolicy(root);
      }
      long sid = sessionId();
      if (sid != lastSession) {
        left.clear(); // their registrations ended with the old session
        lastSession = sid;
      }
      for (String k : left.keySet()) {
        String[] rt = k.split("\u0000", 2);
        ackLeft(rt[0], rt[1]);
      }
      for (ProducerState p : producers) {
        applies.addAll(p.resync(sid));
      }
    } catch (Exception exc) {
      LOG.info("re-synchronising with ZooKeeper failed ({}); retrying", exc.toString());
      schedule(() -> resync(gen), RETRY_MS);
      return;
    }
    synchronized (this) {
      if (gen != generation.get()) {
        return; // the session changed meanwhile: a later resync runs
      }
      usable = true;
    }
    for (Runnable apply : applies) {
      apply.run();
    }
  }

  // --- the ACL policy of each root -------------------------------------------------------

  private void watchPolicy(String root) {
    if (roots.add(root)) {
      try {
        loadPolicy(root);
      } catch (Exception exc) {
        LOG.warn("cannot read the ACL policy at {}: {}", Records.aclPolicyPath(root), exc.toString());
      }
    }
  }

  private void loadPolicy(String root) throws Exception {
    String path = Records.aclPolicyPath(root);
    Stat stat =
        client.checkExists().usingWatcher((org.apache.zookeeper.Watcher) e -> submit(() -> reloadPolicy(root))).forPath(path);
    byte[] data = null;
    if (stat != null) {
      try {
        data = client.getData().forPath(path);
      } catch (KeeperException.NoNodeException gone) {
        data = null;
      }
    }
    Records.AclPolicy policy = null;
    try {
      policy = Records.AclPolicy.parse(data, path);
    } catch (Records.CorruptRecordException exc) {
      LOG.warn("ignoring the ACL policy: {}", exc.getMessage());
    }
    if (policy == null) {
      acl.policies.remove(root);
    } else {
      acl.policies.put(root, policy);
    }
  }

  private void reloadPolicy(String root) {
    try {
      loadPolicy(root);
    } catch (Exception exc) {
      if (usable) {
        schedule(() -> reloadPolicy(root), RETRY_MS);
      }
    }
  }

  // --- registrations that outlive their producer -----------------------------------------

  /**
   * Keep acking the epochs of a closed producer's registration that ZooKeeper's ACLs keep
   * this session from deleting (producers may not delete registrations: it would let one
   * delete another's). The registration lives as long as this shared session; the producer
   * has nothing in flight, so each ack is true, and the barrier never waits for it. The
   * worker watches the topic record and acks every pending epoch for it.
   */
  void keepAcking(String root, String topic, String id) {
    left.computeIfAbsent(root + "\u0000" + topic, k -> ConcurrentHashMap.newKeySet()).add(id);
    ackLeft(root, topic);
  }

  private void ackLeft(String root, String topic) {
    String k = root + "\u0000" + topic;
    Set<String> ids = left.get(k);
    if (ids == null || ids.isEmpty()) {
      return;
    }
    String path = Records.topicPath(root, topic);
    org.apache.zookeeper.Watcher watcher =
        leftWatchers.computeIfAbsent(k, x -> e -> submit(() -> ackLeft(root, topic)));
    try {
      Stat stat = client.checkExists().usingWatcher(watcher).forPath(path);
      Records.TopicRecord record = stat == null ? null : Records.TopicRecord.parse(client.getData().forPath(path), path);
      if (record != null && record.pending >= 0) {
        for (String id : ids) {
          ProducerState.writeAck(
              client, root, topic, id, record.pending, Records.ackRecord(id, record.pending, Map.of(), Records.now()));
        }
      }
    } catch (Exception exc) {
      if (usable) {
        schedule(() -> ackLeft(root, topic), RETRY_MS);
      }
    }
  }

  // --- the worker -------------------------------------------------------------------------

  void submit(Runnable task) {
    try {
      worker.execute(guard(task));
    } catch (java.util.concurrent.RejectedExecutionException closed) {
      // closing: nothing to follow any more
    }
  }

  void schedule(Runnable task, long delayMs) {
    try {
      worker.schedule(guard(task), delayMs, TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException closed) {
      // closing
    }
  }

  private static Runnable guard(Runnable task) {
    return () -> {
      try {
        task.run();
      } catch (Throwable exc) {
        LOG.error("ordered ZooKeeper worker: unexpected error", exc);
      }
    };
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}

package org.orderedkafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.state.ConnectionStateListener;
import org.apache.kafka.common.KafkaException;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** {@link ConsumerStore} on the JVM's shared ZooKeeper session ({@link ZkSession}). */
final class ZkConsumerStore implements ConsumerStore {
  private static final Logger LOG = LoggerFactory.getLogger(ZkConsumerStore.class);

  private final OrderedSettings settings;
  private final LayoutHistories histories;
  private final ZkSession zk;
  private final CuratorFramework client;
  /** group NUL topic NUL partition -> the last offset published there. */
  private final Map<String, Long> published = new ConcurrentHashMap<>();
  private final Map<String, Boolean> registered = new ConcurrentHashMap<>();
  /** The member record's path and data once written; written again after a reconnect. */
  private final AtomicReference<Map.Entry<String, byte[]>> memberRecord = new AtomicReference<>();
  private final ConnectionStateListener rewriteMember =
      (c, state) -> {
        if (state == ConnectionState.RECONNECTED) {
          writeMember();
        }
      };
  private volatile boolean closed;

  ZkConsumerStore(OrderedSettings settings) {
    this.settings = settings;
    histories = new LayoutHistories(settings);
    zk = histories.session();
    client = zk.client;
  }

  @Override
  public boolean connected() {
    return client.getZookeeperClient().isConnected();
  }

  @Override
  public LayoutHistories.History read(String topic) {
    return histories.read(topic);
  }

  @Override
  public Check check(
      Collection<String> topics, String group, Collection<String> markers, long timeoutMs) {
    if (!connected()) {
      throw new KafkaException("the ZooKeeper session is not connected");
    }
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    // The sync and every exists go out back to back, in the background (C-CHECK-2): one
    // session answers in order, so every exists sees what the sync saw, and the check costs
    // one round trip instead of one per request (it ran on the poll thread, request by request).
    List<String> topicPaths = new ArrayList<>();
    for (String topic : topics) {
      topicPaths.add(Records.topicPath(settings.root, topic));
    }
    List<String> markerPaths = new ArrayList<>();
    if (group != null) {
      for (String topic : markers) {
        markerPaths.add(rewindPath(group, topic));
      }
    }
    Map<String, Long> zxids = new ConcurrentHashMap<>();
    AtomicReference<String> failed = new AtomicReference<>();
    CountDownLatch answered = new CountDownLatch(1 + topicPaths.size() + markerPaths.size());
    try {
      client.sync().inBackground((c, e) -> answered.countDown()).forPath(topicPaths.get(0));
      for (String path : concat(topicPaths, markerPaths)) {
        client
            .checkExists()
            .inBackground(
                (c, e) -> {
                  int rc = e.getResultCode();
                  if (rc == KeeperException.Code.OK.intValue()) {
                    zxids.put(path, e.getStat().getMzxid());
                  } else if (rc == KeeperException.Code.NONODE.intValue()) {
                    zxids.put(path, -1L);
                  } else {
                    failed.compareAndSet(null, path + ": " + KeeperException.Code.get(rc));
                  }
                  answered.countDown();
                })
            .forPath(path);
      }
      if (!answered.await(timeoutMs, TimeUnit.MILLISECONDS)) {
        throw new KafkaException("the layout check did not answer in " + timeoutMs + " ms");
      }
    } catch (KafkaException e) {
      throw e;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KafkaException("interrupted in a layout check", e);
    } catch (Exception e) {
      throw new KafkaException("layout check failed: " + e, e);
    }
    if (failed.get() != null) {
      throw new KafkaException("layout check failed: " + failed.get());
    }
    if (System.nanoTime() > deadline) {
      throw new KafkaException("the layout check took longer than " + timeoutMs + " ms");
    }
    Map<String, Long> topicZxids = new HashMap<>();
    Map<String, Long> markerZxids = new HashMap<>();
    int i = 0;
    for (String topic : topics) {
      topicZxids.put(topic, zxids.get(topicPaths.get(i++)));
    }
    i = 0;
    for (String topic : group == null ? List.<String>of() : markers) {
      markerZxids.put(topic, zxids.get(markerPaths.get(i++)));
    }
    return new Check(topicZxids, markerZxids);
  }

  private static List<String> concat(List<String> a, List<String> b) {
    List<String> out = new ArrayList<>(a);
    out.addAll(b);
    return out;
  }

  @Override
  public long markRewound(String group, String topic) {
    String path = rewindPath(group, topic);
    try {
      try {
        return client.setData().forPath(path, new byte[0]).getMzxid();
      } catch (KeeperException.NoNodeException absent) {
        try {
          client.create().creatingParentsIfNeeded().forPath(path, new byte[0]);
        } catch (KeeperException.NodeExistsException raced) {
          // another member made it: its mzxid is as good as ours
        }
        Stat stat = client.checkExists().forPath(path);
        return stat == null ? -1 : stat.getMzxid();
      }
    } catch (Exception e) {
      throw new KafkaException("writing the rewind marker " + path + ": " + e, e);
    }
  }

  @Override
  public void registerGroup(String group, String topic) {
    if (registered.putIfAbsent(group + "\u0000" + topic, true) != null) {
      return;
    }
    String path = groupPath(group) + "/topics/" + topic;
    try {
      if (client.checkExists().forPath(path) == null) {
        Map<String, Object> m = new TreeMap<>();
        m.put("group", group);
        m.put("registered_at", Records.now());
        m.put("topic", topic);
        m.put("version", 1L);
        client.create().creatingParentsIfNeeded().forPath(path, json(m));
      }
    } catch (KeeperException.NodeExistsException raced) {
      // registered by another member
    } catch (Exception e) {
      registered.remove(group + "\u0000" + topic);
      LOG.warn("could not register group {} on {} (its commits still hold trims): {}", group, topic, e.toString());
    }
  }

  @Override
  public void registerMember(String group, String member, String clientId) {
    String path = groupPath(group) + "/members/" + quote(member);
    byte[] data =
        Records.groupMemberRecord(
            member, group, clientId, ProducerState.hostName(), ProcessHandle.current().pid(), Records.now());
    if (!memberRecord.compareAndSet(null, Map.entry(path, data))) {
      return;
    }
    client.getConnectionStateListenable().addListener(rewriteMember);
    writeMember();
  }

  /** Write the member record (ephemeral) on the session's worker; a failure is logged. */
  private void writeMember() {
    Map.Entry<String, byte[]> record = memberRecord.get();
    if (record == null) {
      return;
    }
    zk.worker.execute(
        () -> {
          if (closed) {
            return;
          }
          try {
            try {
              client.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL).forPath(record.getKey(), record.getValue());
            } catch (KeeperException.NodeExistsException ours) {
              client.setData().forPath(record.getKey(), record.getValue());
            }
          } catch (Exception e) {
            LOG.debug("member record {} not written: {}", record.getKey(), e.toString());
          }
        });
  }

  @Override
  public void declareInterest(String group, String topic, String member, Map<Integer, Long> waits) {
    Map<Integer, Long> copy = new TreeMap<>(waits);
    zk.worker.execute(
        () -> {
          if (closed) {
            return;
          }
          String path = groupPath(group) + "/interest/" + topic + "/" + quote(member);
          try {
            if (copy.isEmpty()) {
              try {
                client.delete().forPath(path);
              } catch (KeeperException.NoNodeException gone) {
                // nothing declared
              }
              return;
            }
            Map<String, Object> w = new TreeMap<>();
            for (Map.Entry<Integer, Long> e : copy.entrySet()) {
              w.put(String.valueOf(e.getKey()), e.getValue());
            }
            Map<String, Object> m = new TreeMap<>();
            m.put("at", Records.now());
            m.put("member", member);
            m.put("version", 1L);
            m.put("waits", w);
            byte[] data = json(m);
            try {
              client.setData().forPath(path, data);
            } catch (KeeperException.NoNodeException absent) {
              client.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL).forPath(path, data);
            }
          } catch (Exception e) {
            LOG.debug("interest of {} in {} not written: {}", member, topic, e.toString());
          }
        });
  }

  @Override
  public void publishProgress(String group, String topic, int partition, long offset) {
    String key = group + "\u0000" + topic + "\u0000" + partition;
    zk.worker.execute(
        () -> {
          if (closed || offset <= published.getOrDefault(key, -1L)) {
            return;
          }
          try {
            if (!wanted(group, topic, partition)) {
              return;
            }
            String path = groupPath(group) + "/progress/" + topic + "/" + partition;
            Map<String, Object> m = new TreeMap<>();
            m.put("at", Records.now());
            m.put("offset", offset);
            m.put("partition", (long) partition);
            m.put("version", 1L);
            byte[] data = json(m);
            try {
              client.setData().forPath(path, data);
            } catch (KeeperException.NoNodeException absent) {
              client.create().creatingParentsIfNeeded().forPath(path, data);
            }
            published.merge(key, offset, Math::max);
          } catch (Exception e) {
            LOG.debug("progress of {}/{} not published: {}", topic, partition, e.toString());
          }
        });
  }

  /** Whether some member's interest in {@code topic} lists {@code partition}. */
  private boolean wanted(String group, String topic, int partition) throws Exception {
    String parent = groupPath(group) + "/interest/" + topic;
    List<String> members;
    try {
      members = client.getChildren().forPath(parent);
    } catch (KeeperException.NoNodeException none) {
      return false;
    }
    for (String member : members) {
      try {
        Object parsed = Json.parse(new String(client.getData().forPath(parent + "/" + member), StandardCharsets.UTF_8));
        if (parsed instanceof Map && ((Map<?, ?>) parsed).get("waits") instanceof Map
            && ((Map<?, ?>) ((Map<?, ?>) parsed).get("waits")).containsKey(String.valueOf(partition))) {
          return true;
        }
      } catch (KeeperException.NoNodeException gone) {
        // that member left
      } catch (RuntimeException corrupt) {
        // an interest record we cannot read waits on nothing we know of
      }
    }
    return false;
  }

  String groupPath(String group) {
    return Records.join(settings.root, "/groups/" + quote(group));
  }

  String rewindPath(String group, String topic) {
    return groupPath(group) + "/rewinds/" + topic;
  }

  /** Python's {@code urllib.parse.quote(name, safe="")}. */
  static String quote(String name) {
    StringBuilder out = new StringBuilder();
    for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
      int c = b & 0xff;
      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
          || c == '_' || c == '.' || c == '-' || c == '~') {
        out.append((char) c);
      } else {
        out.append('%').append(String.format("%02X", c));
      }
    }
    return out.toString();
  }

  private static byte[] json(Map<String, Object> m) {
    return Json.write(m).getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public void close() {
    if (!closed) {
      closed = true;
      client.getConnectionStateListenable().removeListener(rewriteMember);
      Map.Entry<String, byte[]> member = memberRecord.get();
      if (member != null) {
        // The session is shared with the JVM's other clients: it may outlive this consumer.
        try {
          client.delete().forPath(member.getKey());
        } catch (Exception e) {
          LOG.debug("member record {} not deleted: {}", member.getKey(), e.toString());
        }
      }
      histories.close();
    }
  }
}

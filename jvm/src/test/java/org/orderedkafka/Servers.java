package org.orderedkafka;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryNTimes;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The real servers of the integration tests: {@code ORDERED_TEST_ZOOKEEPER_CONNECT} and
 * {@code ORDERED_TEST_BOOTSTRAP_SERVERS} (tests/integration/test_jvm_maven.py sets them to
 * the pytest session's servers); without them the tests are skipped. The layout records a
 * controller would write are written here in the JSON of coordinator/kernel/store/records.py
 * (Java has no controller: a test publishes its epochs itself).
 */
final class Servers implements AutoCloseable {
  /** The ZooKeeper identity of this helper's client (a coordinator in the ACL tests). */
  static final String COORDINATOR = "digest:" + digestId("coordinator", "c-pw");

  final String zookeeper;
  final String bootstrap;
  final String root = "/jvm-test-" + UUID.randomUUID().toString().substring(0, 8);
  final CuratorFramework zk;
  final Admin admin;

  private Servers(String zookeeper, String bootstrap) {
    this.zookeeper = zookeeper;
    this.bootstrap = bootstrap;
    zk =
        CuratorFrameworkFactory.builder()
            .connectString(zookeeper)
            .retryPolicy(new RetryNTimes(3, 200))
            .sessionTimeoutMs(10_000)
            // A digest identity (any digest login is accepted): the ACL tests name it as
            // the coordinator, which may do everything.
            .authorization("digest", "coordinator:c-pw".getBytes(StandardCharsets.UTF_8))
            .build();
    zk.start();
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    admin = Admin.create(p);
  }

  /** The servers, or the calling test is skipped. */
  static Servers get() {
    String zookeeper = System.getenv("ORDERED_TEST_ZOOKEEPER_CONNECT");
    String bootstrap = System.getenv("ORDERED_TEST_BOOTSTRAP_SERVERS");
    assumeTrue(
        zookeeper != null && !zookeeper.isEmpty() && bootstrap != null && !bootstrap.isEmpty(),
        "ORDERED_TEST_ZOOKEEPER_CONNECT and ORDERED_TEST_BOOTSTRAP_SERVERS are not set");
    return new Servers(zookeeper, bootstrap);
  }

  @Override
  public void close() {
    try {
      zk.delete().deletingChildrenIfNeeded().forPath(root);
    } catch (Exception ignored) {
      // nothing was written
    }
    zk.close();
    admin.close();
  }

  String createTopic(int partitions) throws Exception {
    String topic = "jvm-" + UUID.randomUUID().toString().substring(0, 12);
    admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
    for (int i = 0; i < 100; i++) {
      try {
        var d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        if (d.partitions().stream().allMatch(x -> x.leader() != null)) {
          break;
        }
      } catch (java.util.concurrent.ExecutionException notYet) {
        // the new topic's metadata has not reached the broker answering yet
      }
      Thread.sleep(100);
    }
    return topic;
  }

  /**
   * The topic id as the Python side stores it in a {@code TopicRecord}: librdkafka's
   * standard base64 ({@code +} and {@code /}), where Kafka's {@code Uuid} prints the URL-safe
   * alphabet ({@code -} and {@code _}).
   */
  String topicId(String topic) throws Exception {
    return kafkaTopicId(topic).replace('-', '+').replace('_', '/');
  }

  /** The topic id as kafka-clients prints it. */
  String kafkaTopicId(String topic) throws Exception {
    return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).topicId().toString();
  }

  Properties producerConfig() {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, OrderedPartitioner.class.getName());
    p.put(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, OrderedProducerInterceptor.class.getName());
    p.put("ordered.zookeeper.connect", zookeeper);
    p.put("ordered.zookeeper.root", root);
    return p;
  }

  KafkaProducer<String, String> producer(Map<String, Object> extra) {
    Properties p = producerConfig();
    p.putAll(extra);
    return new KafkaProducer<>(p);
  }

  // --- the records a controller writes --------------------------------------------------

  String topicPath(String topic) {
    return root + "/topics/" + topic;
  }

  String epochPath(String topic, long epoch) {
    return topicPath(topic) + "/epochs/" + String.format("%010d", epoch);
  }

  static byte[] json(Map<String, Object> m) {
    return Json.write(m).getBytes(StandardCharsets.UTF_8);
  }

  static Map<String, Object> topicRecord(
      String topic, String topicId, int initial, int active, long epoch, boolean pending, int physical, String algorithm) {
    Map<String, Object> m = new TreeMap<>();
    m.put("version", 2L);
    m.put("topic", topic);
    m.put("topic_id", topicId);
    m.put("initial", (long) initial);
    m.put("active", (long) active);
    m.put("epoch", epoch);
    m.put("pending", pending ? (Object) epoch : null);
    m.put("physical", (long) physical);
    m.put("algorithm", algorithm);
    m.put("ordered", true);
    m.put("compacted", false);
    m.put("adopted_at", 1.0);
    return m;
  }

  static Map<String, Object> epochRecord(
      String topic, long epoch, int initial, int from, int to, boolean sealed, List<String> producers) {
    Map<String, Object> m = new TreeMap<>();
    m.put("version", 1L);
    m.put("topic", topic);
    m.put("epoch", epoch);
    m.put("initial", (long) initial);
    m.put("from_active", (long) from);
    m.put("to_active", (long) to);
    m.put("state", sealed ? "sealed" : "pending");
    List<Object> edges = new ArrayList<>();
    for (int[] e : Flow.keyFlow(initial, from, to)) {
      edges.add(List.of((long) e[0], (long) e[1]));
    }
    m.put("edges", edges);
    m.put("boundaries", Map.of());
    m.put("producers", new ArrayList<Object>(producers));
    m.put("expired", Map.of());
    m.put("created_at", 1.0);
    m.put("sealed_at", sealed ? (Object) 2.0 : null);
    m.put("delivery_timeouts_ms", Map.of());
    return m;
  }

  /** Adopt {@code topic} with {@code initial} partitions (epoch 0, sealed). */
  void adopt(String topic, String topicId, int initial, int physical, String algorithm) throws Exception {
    zk.create()
        .creatingParentsIfNeeded()
        .forPath(topicPath(topic), json(topicRecord(topic, topicId, initial, initial, 0, false, physical, algorithm)));
    zk.create().forPath(topicPath(topic) + "/producers");
    zk.create().creatingParentsIfNeeded().forPath(epochPath(topic, 0), json(epochRecord(topic, 0, initial, initial, initial, true, List.of())));
    zk.create().forPath(epochPath(topic, 0) + "/acks");
  }

  /** Publish epoch {@code epoch} (pending) moving to {@code to} active partitions. */
  void publish(String topic, String topicId, int initial, int from, int to, long epoch, int physical, String algorithm)
      throws Exception {
    List<String> producers = zk.getChildren().forPath(topicPath(topic) + "/producers");
    zk.create().forPath(epochPath(topic, epoch), json(epochRecord(topic, epoch, initial, from, to, false, producers)));
    zk.create().forPath(epochPath(topic, epoch) + "/acks");
    zk.setData().forPath(topicPath(topic), json(topicRecord(topic, topicId, initial, to, epoch, true, physical, algorithm)));
  }

  /** Seal epoch {@code epoch}. */
  void seal(String topic, String topicId, int initial, int from, int to, long epoch, int physical, String algorithm)
      throws Exception {
    zk.setData().forPath(epochPath(topic, epoch), json(epochRecord(topic, epoch, initial, from, to, true, List.of())));
    zk.setData().forPath(topicPath(topic), json(topicRecord(topic, topicId, initial, to, epoch, false, physical, algorithm)));
  }

  List<String> producers(String topic) throws Exception {
    return zk.getChildren().forPath(topicPath(topic) + "/producers");
  }

  static String digestId(String user, String password) {
    try {
      byte[] sha =
          java.security.MessageDigest.getInstance("SHA-1")
              .digest((user + ":" + password).getBytes(StandardCharsets.UTF_8));
      return user + ":" + java.util.Base64.getEncoder().encodeToString(sha);
    } catch (java.security.NoSuchAlgorithmException exc) {
      throw new IllegalStateException(exc);
    }
  }

  /** Write an ACL policy ({@code AclPolicyRecord}) at {@code {root}/acl}. */
  void policy(List<String> producers) throws Exception {
    Map<String, Object> policy = new TreeMap<>();
    policy.put("version", 1L);
    policy.put("coordinator", List.of(COORDINATOR));
    policy.put("producers", new ArrayList<Object>(producers));
    policy.put("consumers", List.of());
    policy.put("readers", List.of());
    policy.put("groups", Map.of());
    policy.put("applied_at", 1.0);
    zk.create().creatingParentsIfNeeded().forPath(root + "/acl", json(policy));
  }

  @SuppressWarnings("unchecked")
  Map<String, Object> read(String path) throws Exception {
    return (Map<String, Object>) Json.parse(new String(zk.getData().forPath(path), StandardCharsets.UTF_8));
  }

  /** Wait until {@code path} exists (at most {@code ms}). */
  boolean await(String path, long ms) throws Exception {
    long end = System.currentTimeMillis() + ms;
    while (System.currentTimeMillis() < end) {
      if (zk.checkExists().forPath(path) != null) {
        return true;
      }
      Thread.sleep(20);
    }
    return false;
  }
}

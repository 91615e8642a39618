package org.orderedkafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A real {@code KafkaProducer} with the plugins against real ZooKeeper and Kafka (skipped
 * without {@code ORDERED_TEST_ZOOKEEPER_CONNECT}/{@code ORDERED_TEST_BOOTSTRAP_SERVERS}).
 * What Java alone can show: the registration's contents, routing to the linear-hash
 * partition, the barrier's ack (with its proof) and the pause, refusal while ZooKeeper is
 * cut off, leaving, the shared session, the topic-id check and the ACL of a registration.
 * Cross-language barrier runs are tests/integration's (Python controller and producers).
 */
class ProducerIntegrationTest {
  Servers servers;
  final List<KafkaProducer<String, String>> producers = new ArrayList<>();

  @BeforeEach
  void servers() {
    servers = Servers.get();
  }

  @AfterEach
  void close() throws Exception {
    for (KafkaProducer<String, String> p : producers) {
      p.close();
    }
    if (servers != null) {
      servers.close();
    }
  }

  KafkaProducer<String, String> producer(Map<String, Object> extra) {
    KafkaProducer<String, String> p = servers.producer(extra);
    producers.add(p);
    return p;
  }

  static ProducerState stateOf(String producerId) {
    for (ProducerState s : ProducerState.LIVE) {
      if (s.id.equals(producerId)) {
        return s;
      }
    }
    throw new AssertionError("no live producer " + producerId);
  }

  static void until(String what, long ms, java.util.function.BooleanSupplier condition) throws InterruptedException {
    long end = System.currentTimeMillis() + ms;
    while (!condition.getAsBoolean()) {
      if (System.currentTimeMillis() > end) {
        throw new AssertionError("timed out waiting for " + what);
      }
      Thread.sleep(10);
    }
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** Adopted with 2 partitions and grown to 3 (sealed), 4 partitions in Kafka. */
  String grownTopic() throws Exception {
    String topic = servers.createTopic(4);
    String id = servers.topicId(topic);
    servers.adopt(topic, id, 2, 4, "murmur3");
    servers.publish(topic, id, 2, 2, 3, 1, 4, "murmur3");
    servers.seal(topic, id, 2, 2, 3, 1, 4, "murmur3");
    return topic;
  }

  @Test
  void registersAsJavaAndRoutesByTheLayout() throws Exception {
    String topic = grownTopic();
    KafkaProducer<String, String> p =
        producer(Map.of("client.id", "jvm-test-client", "delivery.timeout.ms", 45_000, "batch.size", 200));
    Layout layout = new Layout(2, 3, 1);
    int differFromKafka = 0;
    for (int i = 0; i < 200; i++) {
      String key = "key-" + i;
      RecordMetadata m = p.send(new ProducerRecord<>(topic, key, "v" + i)).get(10, TimeUnit.SECONDS);
      assertEquals(layout.partitionFor(utf8(key), "murmur3"), m.partition(), key);
      if ((Hashing.murmur2(utf8(key)) & 0x7fffffff) % 4 != m.partition()) {
        differFromKafka++;
      }
    }
    assertTrue(differFromKafka > 50, "the layout's routing should differ from murmur2 % 4");
    boolean[] seen = new boolean[4];
    for (int i = 0; i < 300; i++) {
      seen[p.send(new ProducerRecord<>(topic, null, "unkeyed-" + i)).get(10, TimeUnit.SECONDS).partition()] = true;
    }
    assertFalse(seen[3], "an unkeyed record went to a partition the layout does not use");
    assertTrue(seen[0] || seen[1] || seen[2]);

    List<String> ids = servers.producers(topic);
    assertEquals(1, ids.size());
    String id = ids.get(0);
    Map<String, Object> reg = servers.read(servers.topicPath(topic) + "/producers/" + id);
    assertEquals(2L, reg.get("version"));
    assertEquals("java", reg.get("language"));
    assertEquals(id, reg.get("id"));
    assertEquals("jvm-test-client", reg.get("client_id"));
    assertEquals(45_000L, reg.get("delivery_timeout_ms"));
    assertEquals(ProcessHandle.current().pid(), reg.get("pid"));
    assertEquals(ProducerState.hostName(), reg.get("host"));
    assertTrue(id.startsWith("p-") && id.contains("-" + ProcessHandle.current().pid() + "-"), id);
    assertInstanceOf(Double.class, reg.get("registered_at"));
  }

  @Test
  void aPlainTopicRoutesAsKafkaDoes() throws Exception {
    String topic = servers.createTopic(3);
    KafkaProducer<String, String> p = producer(Map.of());
    for (int i = 0; i < 50; i++) {
      String key = "k" + i;
      RecordMetadata m = p.send(new ProducerRecord<>(topic, key, "v")).get(10, TimeUnit.SECONDS);
      assertEquals((Hashing.murmur2(utf8(key)) & 0x7fffffff) % 3, m.partition());
    }
    // Not adopted: registered all the same (an adoption then lists it in its first barrier).
    assertEquals(1, servers.producers(topic).size());
  }

  @Test
  void anUnorderedAdoptionRoutesAsKafkaAndAcksAtOnce() throws Exception {
    String topic = servers.createTopic(4);
    String tid = servers.topicId(topic);
    servers.adopt(topic, tid, 2, 4, "murmur3");
    Map<String, Object> unordered = Servers.topicRecord(topic, tid, 2, 2, 0, false, 4, "murmur3");
    unordered.put("ordered", false); // KIP-253 enable.ordered.delivery=false
    servers.zk.setData().forPath(servers.topicPath(topic), Servers.json(unordered));
    KafkaProducer<String, String> p = producer(Map.of("linger.ms", 30_000));
    for (int i = 0; i < 30; i++) {
      RecordMetadata m = sendNow(p, topic, "k" + i);
      assertEquals((Hashing.murmur2(utf8("k" + i)) & 0x7fffffff) % 4, m.partition());
    }
    p.send(new ProducerRecord<>(topic, "lingering", "v")); // in flight: an ordered topic would wait
    String id = servers.producers(topic).get(0);
    Map<String, Object> pending = Servers.topicRecord(topic, tid, 2, 3, 1, true, 4, "murmur3");
    pending.put("ordered", false);
    servers.zk.create().forPath(servers.epochPath(topic, 1), Servers.json(Servers.epochRecord(topic, 1, 2, 2, 3, false, List.of(id))));
    servers.zk.create().forPath(servers.epochPath(topic, 1) + "/acks");
    servers.zk.setData().forPath(servers.topicPath(topic), Servers.json(pending));
    assertTrue(servers.await(servers.epochPath(topic, 1) + "/acks/" + id, 10_000), "an unordered topic's epoch waits for nothing");
  }

  @Test
  void acksAPendingEpochWithProofAndSwitchesRoutes() throws Exception {
    String topic = servers.createTopic(4);
    String tid = servers.topicId(topic);
    servers.adopt(topic, tid, 2, 4, "murmur3");
    KafkaProducer<String, String> p = producer(Map.of());
    Map<Integer, Long> last = new HashMap<>();
    for (int i = 0; i < 100; i++) {
      RecordMetadata m = p.send(new ProducerRecord<>(topic, "k" + i, "v")).get(10, TimeUnit.SECONDS);
      assertEquals(new Layout(2, 2, 0).partitionFor(utf8("k" + i), "murmur3"), m.partition());
      last.merge(m.partition(), m.offset(), Math::max);
    }
    String id = servers.producers(topic).get(0);
    servers.publish(topic, tid, 2, 2, 3, 1, 4, "murmur3");
    String ack = servers.epochPath(topic, 1) + "/acks/" + id;
    assertTrue(servers.await(ack, 10_000), "no ack of epoch 1");
    Map<String, Object> record = servers.read(ack);
    assertEquals(1L, record.get("version"));
    assertEquals(id, record.get("id"));
    assertEquals(1L, record.get("epoch"));
    Map<String, Object> expected = new HashMap<>();
    last.forEach((k, v) -> expected.put(String.valueOf(k), v));
    assertEquals(expected, record.get("last_offsets"));
    // The proof: the registration was written in the ack's own transaction.
    Stat ackStat = servers.zk.checkExists().forPath(ack);
    Stat regStat = servers.zk.checkExists().forPath(servers.topicPath(topic) + "/producers/" + id);
    assertEquals(ackStat.getCzxid(), regStat.getMzxid());
    // Routed by the new layout from now on.
    Layout grown = new Layout(2, 3, 1);
    for (int i = 0; i < 100; i++) {
      RecordMetadata m = p.send(new ProducerRecord<>(topic, "k" + i, "v")).get(10, TimeUnit.SECONDS);
      assertEquals(grown.partitionFor(utf8("k" + i), "murmur3"), m.partition());
    }
  }

  @Test
  void anExpansionToPartitionsTheProducerHasNotSeenYet() throws Exception {
    String topic = servers.createTopic(2);
    String tid = servers.topicId(topic);
    servers.adopt(topic, tid, 2, 2, "murmur3");
    KafkaProducer<String, String> p = producer(Map.of());
    for (int i = 0; i < 20; i++) {
      p.send(new ProducerRecord<>(topic, "k" + i, "v")).get(10, TimeUnit.SECONDS);
    }
    // As the controller does: partitions first, then the epoch. The producer's metadata
    // still says 2 partitions; records routed to the new ones wait for it to catch up.
    servers.admin
        .createPartitions(Map.of(topic, org.apache.kafka.clients.admin.NewPartitions.increaseTo(4)))
        .all()
        .get();
    servers.publish(topic, tid, 2, 2, 4, 1, 4, "murmur3");
    String id = servers.producers(topic).get(0);
    assertTrue(servers.await(servers.epochPath(topic, 1) + "/acks/" + id, 10_000), "no ack");
    Layout grown = new Layout(2, 4, 1);
    boolean[] seen = new boolean[4];
    for (int i = 0; i < 40; i++) {
      RecordMetadata m = p.send(new ProducerRecord<>(topic, "k" + i, "v")).get(30, TimeUnit.SECONDS);
      assertEquals(grown.partitionFor(utf8("k" + i), "murmur3"), m.partition());
      seen[m.partition()] = true;
    }
    assertTrue(seen[2] && seen[3], "no key went to a new partition");
  }

  @Test
  void aSendDuringTheSwitchWaitsForTheOlderRecords() throws Exception {
    String topic = servers.createTopic(4);
    String tid = servers.topicId(topic);
    servers.adopt(topic, tid, 2, 4, "murmur3");
    // A long linger keeps the first record unacknowledged until the producer flushes.
    KafkaProducer<String, String> p = producer(Map.of("linger.ms", 10_000));
    Future<RecordMetadata> warm = p.send(new ProducerRecord<>(topic, "warm", "v")); // first use
    p.flush();
    warm.get(10, TimeUnit.SECONDS);
    Future<RecordMetadata> first = p.send(new ProducerRecord<>(topic, "old", "v"));
    String id = servers.producers(topic).get(0);
    TopicState t = stateOf(id).find(topic);
    servers.publish(topic, tid, 2, 2, 3, 1, 4, "murmur3");
    until("the switch", 10_000, () -> t.state() == TopicState.State.SWITCHING);
    assertFalse(first.isDone());
    AtomicReference<Future<RecordMetadata>> second = new AtomicReference<>();
    CompletableFuture<Void> sender =
        CompletableFuture.runAsync(() -> second.set(p.send(new ProducerRecord<>(topic, "new", "v"))));
    Thread.sleep(500);
    assertFalse(sender.isDone(), "the send went on while an older record was unacknowledged");
    assertFalse(servers.await(servers.epochPath(topic, 1) + "/acks/" + id, 10), "acked before the drain");
    p.flush();
    sender.get(10, TimeUnit.SECONDS);
    p.flush(); // the paused record was appended after the drain, during the first flush
    RecordMetadata older = first.get(10, TimeUnit.SECONDS);
    assertEquals(new Layout(2, 3, 1).partitionFor(utf8("new"), "murmur3"), second.get().get(10, TimeUnit.SECONDS).partition());
    String ack = servers.epochPath(topic, 1) + "/acks/" + id;
    assertTrue(servers.await(ack, 10_000));
    // The ack covers the older record: its offset is the last one written under epoch 0.
    assertEquals(older.offset(), asMap(servers.read(ack).get("last_offsets")).get(String.valueOf(older.partition())));
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> asMap(Object o) {
    return (Map<String, Object>) o;
  }

  @Test
  void refusesKeyedRecordsWhileZooKeeperIsCutOff() throws Exception {
    String topic = grownTopic();
    try (TcpProxy proxy = new TcpProxy(servers.zookeeper)) {
      proxy.start();
      KafkaProducer<String, String> p =
          producer(
              Map.of(
                  "ordered.zookeeper.connect", "127.0.0.1:" + proxy.port(),
                  "ordered.zookeeper.session.timeout.ms", 4_000));
      p.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
      String id = servers.producers(topic).get(0);
      TopicState t = stateOf(id).find(topic);
      long session = servers.zk.checkExists().forPath(servers.topicPath(topic) + "/producers/" + id).getEphemeralOwner();

      proxy.stop();
      until("the suspension", 10_000, () -> t.state() == TopicState.State.SUSPENDED);
      AtomicReference<Exception> callback = new AtomicReference<>();
      Future<RecordMetadata> refused = p.send(new ProducerRecord<>(topic, "k", "v"), (m, e) -> callback.set(e));
      ExecutionException exc = assertThrows(ExecutionException.class, () -> refused.get(10, TimeUnit.SECONDS));
      assertInstanceOf(LayoutUnavailableException.class, exc.getCause());
      assertInstanceOf(LayoutUnavailableException.class, callback.get());
      // Unkeyed records keep no order: they still go, to an active partition.
      assertTrue(p.send(new ProducerRecord<>(topic, null, "v")).get(10, TimeUnit.SECONDS).partition() < 3);

      // Cut for longer than the session timeout: the session is lost, and a new one
      // registers again before keyed records are routed.
      Thread.sleep(6_000);
      proxy.start();
      until("the re-synchronisation", 20_000, () -> t.state() == TopicState.State.ROUTING);
      RecordMetadata m = p.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
      assertEquals(new Layout(2, 3, 1).partitionFor(utf8("k"), "murmur3"), m.partition());
      Stat reg = servers.zk.checkExists().forPath(servers.topicPath(topic) + "/producers/" + id);
      assertNotNull(reg, "not registered again after the lost session");
      assertTrue(reg.getEphemeralOwner() != session, "the registration should belong to the new session");
      p.close(); // while the proxy still runs: it leaves cleanly
      assertEquals(List.of(), servers.producers(topic));
    }
  }

  @Test
  void aPausedSendFailsWhenTheSessionGoesAndTheAckFollowsItsReturn() throws Exception {
    String topic = servers.createTopic(4);
    String tid = servers.topicId(topic);
    servers.adopt(topic, tid, 2, 4, "murmur3");
    try (TcpProxy proxy = new TcpProxy(servers.zookeeper)) {
      proxy.start();
      KafkaProducer<String, String> p =
          producer(
              Map.of(
                  "ordered.zookeeper.connect", "127.0.0.1:" + proxy.port(),
                  "ordered.zookeeper.session.timeout.ms", 6_000,
                  "linger.ms", 30_000));
      Future<RecordMetadata> warm = p.send(new ProducerRecord<>(topic, "warm", "v"));
      p.flush();
      warm.get(10, TimeUnit.SECONDS);
      p.send(new ProducerRecord<>(topic, "old", "v")); // unacknowledged: lingers
      String id = servers.producers(topic).get(0);
      TopicState t = stateOf(id).find(topic);
      servers.publish(topic, tid, 2, 2, 3, 1, 4, "murmur3");
      until("the switch", 10_000, () -> t.state() == TopicState.State.SWITCHING);
      AtomicReference<Future<RecordMetadata>> paused = new AtomicReference<>();
      CompletableFuture<Void> sender =
          CompletableFuture.runAsync(() -> paused.set(p.send(new ProducerRecord<>(topic, "new", "v"))));
      Thread.sleep(300);
      assertFalse(sender.isDone(), "the send should wait for the drain");
      proxy.stop();
      sender.get(15, TimeUnit.SECONDS);
      ExecutionException exc =
          assertThrows(ExecutionException.class, () -> paused.get().get(10, TimeUnit.SECONDS));
      assertInstanceOf(LayoutUnavailableException.class, exc.getCause());
      // The older record is delivered while ZooKeeper is away; the ack waits for the session.
      p.flush();
      assertFalse(servers.await(servers.epochPath(topic, 1) + "/acks/" + id, 200));
      proxy.start();
      assertTrue(servers.await(servers.epochPath(topic, 1) + "/acks/" + id, 20_000), "no ack after the session came back");
      until("routing again", 20_000, () -> t.state() == TopicState.State.ROUTING);
      assertEquals(
          new Layout(2, 3, 1).partitionFor(utf8("new"), "murmur3"),
          sendNow(p, topic, "new").partition());
      p.close();
    }
  }

  static RecordMetadata sendNow(KafkaProducer<String, String> p, String topic, String key) throws Exception {
    Future<RecordMetadata> f = p.send(new ProducerRecord<>(topic, key, "v"));
    p.flush();
    return f.get(10, TimeUnit.SECONDS);
  }

  @Test
  void closeAcksAndUnregisters() throws Exception {
    String topic = servers.createTopic(4);
    String tid = servers.topicId(topic);
    servers.adopt(topic, tid, 2, 4, "murmur3");
    KafkaProducer<String, String> p = servers.producer(Map.of("linger.ms", 30_000));
    Future<RecordMetadata> warm = p.send(new ProducerRecord<>(topic, "warm", "v"));
    p.flush();
    warm.get(10, TimeUnit.SECONDS);
    for (int i = 0; i < 10; i++) {
      p.send(new ProducerRecord<>(topic, "k" + i, "v"));
    }
    String id = servers.producers(topic).get(0);
    TopicState t = stateOf(id).find(topic);
    servers.publish(topic, tid, 2, 2, 3, 1, 4, "murmur3");
    until("the switch", 10_000, () -> t.state() == TopicState.State.SWITCHING);
    p.close();
    String ack = servers.epochPath(topic, 1) + "/acks/" + id;
    assertTrue(servers.await(ack, 100), "no ack after close");
    assertEquals(List.of(), servers.producers(topic), "still registered after close");
    // The records flushed by close() drained the switch: the ack names their partitions.
    assertFalse(asMap(servers.read(ack).get("last_offsets")).isEmpty(), "the ack lost its offsets");
  }

  @Test
  void everyProducerOfTheJvmSharesOneSession() throws Exception {
    String topic = grownTopic();
    int before = ZkSession.open();
    KafkaProducer<String, String> a = servers.producer(Map.of());
    KafkaProducer<String, String> b = servers.producer(Map.of());
    a.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
    b.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
    assertEquals(before + 1, ZkSession.open());
    List<String> ids = servers.producers(topic);
    assertEquals(2, ids.size());
    Stat one = servers.zk.checkExists().forPath(servers.topicPath(topic) + "/producers/" + ids.get(0));
    Stat two = servers.zk.checkExists().forPath(servers.topicPath(topic) + "/producers/" + ids.get(1));
    assertEquals(one.getEphemeralOwner(), two.getEphemeralOwner());
    a.close();
    assertEquals(before + 1, ZkSession.open());
    assertEquals(1, servers.producers(topic).size());
    b.close();
    assertEquals(before, ZkSession.open());
  }

  @Test
  void acceptsTheTopicIdAsPythonStoresIt() throws Exception {
    // About half of all ids differ between the two base64 alphabets: find one that does.
    String topic = null;
    for (int i = 0; i < 20 && topic == null; i++) {
      String candidate = servers.createTopic(2);
      String id = servers.kafkaTopicId(candidate);
      if (id.indexOf('-') >= 0 || id.indexOf('_') >= 0) {
        topic = candidate;
      }
    }
    assertNotNull(topic, "no topic id with '-' or '_' in 20 tries");
    assertFalse(servers.topicId(topic).equals(servers.kafkaTopicId(topic)));
    servers.adopt(topic, servers.topicId(topic), 2, 2, "murmur3");
    KafkaProducer<String, String> p = producer(Map.of());
    RecordMetadata m = p.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
    assertEquals(new Layout(2, 2, 0).partitionFor(utf8("k"), "murmur3"), m.partition());
  }

  @Test
  void refusesALayoutAdoptedForAnotherTopicId() throws Exception {
    String topic = servers.createTopic(2);
    servers.adopt(topic, "AAAAAAAAAAAAAAAAAAAAAA", 2, 2, "murmur3");
    KafkaProducer<String, String> p = producer(Map.of());
    ExecutionException exc =
        assertThrows(ExecutionException.class, () -> p.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS));
    assertInstanceOf(OrderedLayoutException.class, exc.getCause());
    assertTrue(exc.getCause().getMessage().contains("was adopted as topic id AAAAAAAAAAAAAAAAAAAAAA"), exc.getCause().getMessage());
    assertEquals(List.of(), servers.producers(topic), "a refused producer must not register");
  }

  @Test
  void aRegistrationIsOwnedByItsCreatorUnderAPolicy() throws Exception {
    String topic = grownTopic();
    String producerId = "digest:" + Servers.digestId("producer", "p-pw");
    servers.policy(List.of(producerId));
    KafkaProducer<String, String> p = producer(Map.of("ordered.zookeeper.auth", "digest:producer:p-pw"));
    p.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
    String id = servers.producers(topic).get(0);
    List<String> acl = new ArrayList<>();
    for (ACL a : servers.zk.getACL().forPath(servers.topicPath(topic) + "/producers/" + id)) {
      acl.add(a.getId().getScheme() + ":" + a.getId().getId() + ":" + a.getPerms());
    }
    acl.sort(null);
    // Read for every listed identity, everything for the coordinator, and the creator
    // (named by the server through the "auth" scheme) owns it without ADMIN.
    List<String> expected = new ArrayList<>(List.of(Servers.COORDINATOR + ":31", producerId + ":1", producerId + ":15"));
    expected.sort(null);
    assertEquals(expected, acl);
  }

  @Test
  void aRegistrationAclsKeepIsAckedUntilTheSessionEnds() throws Exception {
    String topic = servers.createTopic(4);
    String tid = servers.topicId(topic);
    String producerId = "digest:" + Servers.digestId("producer", "p-pw");
    servers.policy(List.of(producerId));
    servers.adopt(topic, tid, 2, 4, "murmur3");
    // As `ordered acl apply` leaves it: producers may create registrations, not delete them.
    servers.zk.setACL()
        .withACL(
            List.of(
                new ACL(org.apache.zookeeper.ZooDefs.Perms.ALL, new org.apache.zookeeper.data.Id("digest", Servers.COORDINATOR.substring(7))),
                new ACL(
                    org.apache.zookeeper.ZooDefs.Perms.READ | org.apache.zookeeper.ZooDefs.Perms.CREATE,
                    new org.apache.zookeeper.data.Id("digest", producerId.substring(7)))))
        .forPath(servers.topicPath(topic) + "/producers");
    Map<String, Object> auth = Map.of("ordered.zookeeper.auth", "digest:producer:p-pw");
    KafkaProducer<String, String> a = servers.producer(auth);
    KafkaProducer<String, String> b = servers.producer(auth);
    a.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
    List<String> before = servers.producers(topic);
    b.send(new ProducerRecord<>(topic, "k", "v")).get(10, TimeUnit.SECONDS);
    String idA = before.get(0);
    String idB = servers.producers(topic).stream().filter(x -> !x.equals(idA)).findFirst().get();
    a.close();
    // Still registered (the shared session lives on with b), and so listed by an epoch:
    assertEquals(2, servers.producers(topic).size());
    servers.publish(topic, tid, 2, 2, 3, 1, 4, "murmur3");
    assertTrue(servers.await(servers.epochPath(topic, 1) + "/acks/" + idA, 10_000), "the closed producer's epoch was not acked");
    assertTrue(servers.await(servers.epochPath(topic, 1) + "/acks/" + idB, 10_000));
    Stat ack = servers.zk.checkExists().forPath(servers.epochPath(topic, 1) + "/acks/" + idA);
    Stat reg = servers.zk.checkExists().forPath(servers.topicPath(topic) + "/producers/" + idA);
    assertEquals(ack.getCzxid(), reg.getMzxid(), "the ack is not proven");
    b.close();
    assertEquals(List.of(), servers.producers(topic), "registrations outlived the session");
  }
}

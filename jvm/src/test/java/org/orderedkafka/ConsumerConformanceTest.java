package org.orderedkafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.orderedkafka.VectorFile.asList;
import static org.orderedkafka.VectorFile.asMap;
import static org.orderedkafka.VectorFile.num;

import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.orderedkafka.gate.EpochInfo;
import org.orderedkafka.gate.GateEvaluator;

/**
 * The consumer conformance scenarios ({@code vectors/consumer/*.json}) run against {@link
 * OrderedKafkaConsumer}, with a fake Kafka client (a log per partition, positions, pauses,
 * commits, rebalances) and a fake layout store. The scenarios are written in the spec's terms
 * for a consumer with a stash and a {@code consume}/{@code store_offsets} API; those that
 * apply to a seek-back consumer with Kafka's Java API run here, the others are listed in
 * {@link #NOT_APPLICABLE} with the reason, and a test keeps that list exact.
 */
class ConsumerConformanceTest {
  /** Scenario -> why it does not apply to this consumer. */
  static final Map<String, String> NOT_APPLICABLE = notApplicable();

  private static Map<String, String> notApplicable() {
    Map<String, String> m = new TreeMap<>();
    m.put(
        "explicit-commits-and-stores-pass-through",
        "store_offsets: Kafka's Java Consumer has no offset store; commitSync(offsets) passes"
            + " through as the scenario's commit(offsets) does");
    m.put(
        "with-the-application-storing-the-consumer-stores-nothing",
        "enable.auto.offset.store and store_offsets are librdkafka's; Kafka's Java consumer has"
            + " neither");
    m.put(
        "close-commits-what-was-given-and-drops-the-rest",
        "the order only: Kafka's Java KafkaConsumer.close() auto-commits before it calls"
            + " onPartitionsRevoked (librdkafka after), and the wrapper keeps Java's order; what"
            + " is committed (t/1 at 5, nothing of the held t/2) is what the scenario expects");
    m.put(
        "a-revocation-inside-a-call-takes-its-records-back",
        "the scenario counts a consume() call's calls into the client and revokes inside the"
            + " second; OrderedKafkaConsumer.poll() returns after the client's first non-empty"
            + " poll, so the revocation lands in the next poll(), as with Kafka's own consumer");
    m.put(
        "a-callback-error-after-records-were-given-is-raised-by-the-next-call",
        "C-CB-6 needs records given before a callback raises in the same call: poll() judges"
            + " one batch (a gathered one too) and runs its key callbacks before it gives any"
            + " record of it, and a rebalance callback raises from inside the client's poll,"
            + " before anything is judged; so a raise always comes first (C-CB-5 takes the"
            + " batch back, and it comes again after the callback). The scenario gathers"
            + " partition 1's records from one fetch and partition 2's from the next within one"
            + " call, which poll(), returning after the first non-empty fetch, does not do");
    return m;
  }

  /**
   * Scenario -> the rule this consumer does not meet yet, and how it fails. Each is run and must
   * still fail (as the Python suite's strict xfail): one that passes must leave this list.
   */
  static final Map<String, String> NOT_MET_YET = notMetYet();

  private static Map<String, String> notMetYet() {
    Map<String, String> m = new TreeMap<>();
    return m;
  }

  static List<Map<String, Object>> scenarios() throws Exception {
    List<Map<String, Object>> out = new ArrayList<>();
    try (Stream<Path> files = Files.list(Path.of("../vectors/consumer"))) {
      for (Path f : files.sorted().toList()) {
        if (!f.toString().endsWith(".json") || f.getFileName().toString().equals("schema.json")) {
          continue;
        }
        Map<String, Object> doc =
            asMap(Json.parse(new String(Files.readAllBytes(f), StandardCharsets.UTF_8)));
        for (Object s : asList(doc.get("scenarios"))) {
          Map<String, Object> scenario = asMap(s);
          scenario.put("_file", f.getFileName().toString());
          out.add(scenario);
        }
      }
    }
    return out;
  }

  @TestFactory
  Stream<DynamicTest> scenariosThatApply() throws Exception {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> s : scenarios()) {
      String name = (String) s.get("name");
      if (NOT_APPLICABLE.containsKey(name) || NOT_MET_YET.containsKey(name)) {
        continue;
      }
      // A scenario that loops (a wait on a clock that does not move) fails instead of hanging.
      tests.add(
          DynamicTest.dynamicTest(
              name,
              () -> assertTimeoutPreemptively(Duration.ofSeconds(30), () -> new Driver(s).run())));
    }
    return tests.stream();
  }

  /** Every scenario not met yet still fails, and only with a mismatch (not a hang, not a crash). */
  @TestFactory
  Stream<DynamicTest> scenariosNotMetYetStillFail() throws Exception {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> s : scenarios()) {
      String name = (String) s.get("name");
      if (!NOT_MET_YET.containsKey(name)) {
        continue;
      }
      tests.add(
          DynamicTest.dynamicTest(
              name,
              () -> {
                try {
                  assertTimeoutPreemptively(Duration.ofSeconds(30), () -> new Driver(s).run());
                } catch (Mismatch expected) {
                  return;
                }
                fail(name + " passes now: take it out of NOT_MET_YET (" + NOT_MET_YET.get(name) + ")");
              }));
    }
    return tests.stream();
  }

  /**
   * The meta-test, as the Python suite's: the first checked expectation of every scenario that
   * runs here, changed, must be reported as a mismatch, so no scenario passes by checking nothing.
   */
  @TestFactory
  Stream<DynamicTest> aChangedExpectationIsReported() throws Exception {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> s : scenarios()) {
      String name = (String) s.get("name");
      if (NOT_APPLICABLE.containsKey(name) || NOT_MET_YET.containsKey(name)) {
        continue;
      }
      String where = mutate(s);
      tests.add(
          DynamicTest.dynamicTest(
              name,
              () -> {
                try {
                  assertTimeoutPreemptively(Duration.ofSeconds(30), () -> new Driver(s).run());
                } catch (Mismatch expected) {
                  return;
                }
                fail(name + ": " + where + " changed and the driver saw no mismatch");
              }));
    }
    return tests.stream();
  }

  /** Change the first flippable expectation of {@code s} in place (the Python suite's _flip). */
  static String mutate(Map<String, Object> s) {
    if (Boolean.TRUE.equals(s.get("construct_raises"))) {
      s.put("construct_raises", false);
      return "construct_raises";
    }
    int i = 0;
    for (Object o : asList(s.get("steps"))) {
      Map<String, Object> step = asMap(o);
      if (step.containsKey("expect")) {
        String key = flip(asMap(step.get("expect")));
        if (key != null) {
          return "step " + i + " " + key;
        }
      }
      i++;
    }
    throw new AssertionError(s.get("name") + " has no expectation to flip");
  }

  static String flip(Map<String, Object> expect) {
    for (String key : List.of("records", "events", "zk_writes", "held", "client_paused")) {
      if (expect.containsKey(key)) {
        Object bogus;
        switch (key) {
          case "records":
          case "held":
            bogus = new ArrayList<Object>(List.of("zz", 99L, 99L));
            break;
          case "client_paused":
            bogus = new ArrayList<Object>(List.of("zz", 99L));
            break;
          case "zk_writes":
            bogus = new HashMap<String, Object>(Map.of("event", "rewind_marker", "topic", "zz"));
            break;
          default:
            bogus =
                new HashMap<String, Object>(
                    Map.of("event", "on_lost", "partitions", List.of(List.of("zz", 99L))));
        }
        List<Object> l = new ArrayList<>(asList(expect.get(key)));
        l.add(bogus);
        expect.put(key, l);
        return key;
      }
    }
    for (String key : List.of("stored", "committed", "positions")) {
      if (expect.get(key) instanceof Map && !asMap(expect.get(key)).isEmpty()) {
        Map<String, Object> m = asMap(expect.get(key));
        String first = m.keySet().iterator().next();
        Object old = m.get(first);
        m.put(first, old == null ? 12345L : num(old) + 1);
        return key;
      }
    }
    if (expect.get("waits") instanceof Map && !asMap(expect.get("waits")).isEmpty()) {
      Map<String, Object> m = asMap(expect.get("waits"));
      String first = m.keySet().iterator().next();
      List<Object> l = m.get(first) == null ? new ArrayList<>() : new ArrayList<>(asList(m.get(first)));
      l.add(List.of(99L, 99L, 99L));
      m.put(first, l);
      return "waits";
    }
    if (expect.containsKey("raises") && expect.get("raises") instanceof Boolean) {
      expect.put("raises", !((Boolean) expect.get("raises")));
      return "raises";
    }
    return null;
  }

  @Test
  void theListsOfScenariosNotRunNameOnlyScenariosThatExist() throws Exception {
    Set<String> names = new HashSet<>();
    for (Map<String, Object> s : scenarios()) {
      names.add((String) s.get("name"));
    }
    assertTrue(names.size() >= 40, "too few scenarios: " + names.size());
    for (String name : NOT_APPLICABLE.keySet()) {
      assertTrue(names.contains(name), name + " is not a scenario");
      assertTrue(!NOT_MET_YET.containsKey(name), name + " is in both lists");
    }
    for (String name : NOT_MET_YET.keySet()) {
      assertTrue(names.contains(name), name + " is not a scenario");
    }
  }

  /**
   * One consumer owns the source 0 and the new partition 2 of an expansion 2 -> 3 (keys of 0
   * move to 2 at offset 50 of 0); it has read 0 up to 9 when partition 2 is held at 0.
   */
  static final String OWN_SOURCE_HELD =
        """
        {"name": "own-source-held", "topics": {"t": {"initial": 2}},
         "history": {"t": [
           {"epoch": 0, "state": "sealed", "from_active": 2, "to_active": 2, "edges": [], "boundaries": {}},
           {"epoch": 1, "state": "sealed", "from_active": 2, "to_active": 3, "edges": [[0, 2]],
            "boundaries": {"0": 50, "2": 0}}]},
         "steps": [
           {"do": "assign", "partitions": [["t", 0], ["t", 2]]},
           {"do": "fetched", "records": [{"topic": "t", "partition": 0, "from": 0, "to": 9},
                                         {"topic": "t", "partition": 2, "from": 0, "to": 2}]},
           {"do": "consume", "max": 100, "timeout_ms": 50, "expect": {"held": [["t", 2, 0]]}}]}
        """;

  /**
   * A gate that waits only on a source this consumer reads, given below its boundary, is
   * decided at each interval without reading Kafka (no commit or log start could open it); the
   * source read to its boundary opens it at once. Without the rule each interval cost a read
   * of the committed offsets and one of the log starts, on the poll thread, for as long as the
   * source's backlog took to read.
   */
  @Test
  void aGateWaitingOnlyOnItsOwnSourceIsDecidedWithoutReadingKafka() {
    String text = OWN_SOURCE_HELD;
    Driver d = new Driver(asMap(Json.parse(text)));
    d.run();
    int committed = d.kafka.calls.getOrDefault("committed", 0);
    int starts = d.kafka.calls.getOrDefault("beginningOffsets", 0);
    for (int i = 0; i < 10; i++) {
      assertTrue(d.consumer.poll(Duration.ofMillis(150)).isEmpty()); // 15 gate poll intervals
    }
    assertEquals(committed, (int) d.kafka.calls.getOrDefault("committed", 0), "committed() read");
    assertEquals(starts, (int) d.kafka.calls.getOrDefault("beginningOffsets", 0), "log starts read");

    Map<String, Object> more = new HashMap<>();
    more.put("records", Json.parse("[{\"topic\": \"t\", \"partition\": 0, \"from\": 10, \"to\": 60}]"));
    d.kafka.fetched(more);
    List<Long> given = new ArrayList<>();
    for (int i = 0; i < 5 && !given.contains(0L); i++) {
      for (ConsumerRecord<byte[], byte[]> r : d.consumer.poll(Duration.ofMillis(150))) {
        if (r.partition() == 2) {
          given.add(r.offset());
        }
      }
    }
    assertEquals(List.of(0L, 1L, 2L), given, "the gate opened once the source passed 50");
  }

  /**
   * The same hold, and then retention deletes the source past its boundary: the client's reset
   * moves its position to the new log start, and the next re-check reads Kafka and opens the
   * gate by the log start (C-GATE-6) though nothing more of the source was given.
   */
  @Test
  void aGateWaitingOnItsOwnSourceOpensWhenRetentionPassesTheBoundary() {
    String text = OWN_SOURCE_HELD;
    Driver d = new Driver(asMap(Json.parse(text)));
    d.run();
    TopicPartition source = new TopicPartition("t", 0);
    d.kafka.logStart.put(source, 60L);
    d.kafka.position.put(source, 60L); // auto.offset.reset=earliest past the deleted records
    List<Long> given = new ArrayList<>();
    for (int i = 0; i < 5 && given.size() < 3; i++) {
      for (ConsumerRecord<byte[], byte[]> r : d.consumer.poll(Duration.ofMillis(150))) {
        if (r.partition() == 2) {
          given.add(r.offset());
        }
      }
    }
    assertEquals(List.of(0L, 1L, 2L), given, "the gate opened by the source's log start");
  }

  // --- the driver -------------------------------------------------------------------------

  static final class Mismatch extends AssertionError {
    private static final long serialVersionUID = 1L;

    Mismatch(String message) {
      super(message);
    }
  }

  /** One scenario: the fakes, the consumer, the steps. */
  static final class Driver {
    final Map<String, Object> scenario;
    final FakeStore store = new FakeStore();
    final FakeKafka kafka = new FakeKafka();
    final List<Map<String, Object>> events = new ArrayList<>();
    OrderedKafkaConsumer<byte[], byte[]> consumer;
    int raisesMaybe;
    int raisesAssigned;

    Driver(Map<String, Object> scenario) {
      this.scenario = scenario;
    }

    void run() {
      Map<String, Object> config = new HashMap<>();
      boolean group = !Boolean.FALSE.equals(scenario.get("group"));
      if (group) {
        config.put("group.id", "g");
      }
      config.put("ordered.zookeeper.connect", "fake:2181");
      config.put("ordered.zookeeper.root", "/ordered");
      config.put("ordered.layout.check.max.requests.per.s", "0");
      Map<String, Object> given =
          scenario.containsKey("config") ? asMap(scenario.get("config")) : Map.of();
      for (Map.Entry<String, Object> e : given.entrySet()) {
        Object v = e.getValue();
        config.put(e.getKey(), v instanceof Boolean ? String.valueOf(v) : v);
      }
      config.putIfAbsent("enable.auto.commit", "true");
      if (Boolean.TRUE.equals(scenario.get("construct_raises"))) {
        try {
          OrderedKafkaConsumer.split(config);
        } catch (ConfigException expected) {
          return;
        }
        throw new Mismatch("the configuration was not refused");
      }
      setUpWorld();
      OrderedSettings settings;
      try {
        settings = OrderedKafkaConsumer.split(config);
      } catch (ConfigException e) {
        throw new Mismatch("construction raised: " + e.getMessage());
      }
      Map<String, Object> kafkaConfig = OrderedKafkaConsumer.kafkaConfig(config);
      kafka.autoCommit = false;
      assertEquals("false", kafkaConfig.get("enable.auto.commit"));
      consumer =
          new OrderedKafkaConsumer<>(
              config, settings, kafka.proxy(), store, () -> kafka.clock);
      consumer.sleeper = nanos -> kafka.clock += Math.max(nanos, 1);
      // Kafka's topic ids (C-COPY-3): a topic the scenario names none for does not answer.
      Map<String, Object> ids =
          scenario.containsKey("kafka_topic_ids") ? asMap(scenario.get("kafka_topic_ids")) : Map.of();
      consumer.topicIds =
          name ->
              () -> {
                if (!ids.containsKey(name)) {
                  throw new KafkaException(
                      "Kafka does not answer the topic id of " + name + " (scenario)");
                }
                return (String) ids.get(name);
              };
      // As the Python driver: the key callbacks are heard whether the scenario subscribes or assigns.
      consumer.setKeyListener(new Listener(true));
      int i = 0;
      for (Object o : asList(scenario.get("steps"))) {
        Map<String, Object> step = asMap(o);
        i++;
        events.clear();
        store.writes.clear();
        store.checks = 0;
        Step result = step(step);
        if (step.containsKey("expect")) {
          expect(i, step, asMap(step.get("expect")), result);
        }
      }
    }

    void setUpWorld() {
      Map<String, Object> topics = asMap(scenario.get("topics"));
      Map<String, Object> history =
          scenario.containsKey("history") ? asMap(scenario.get("history")) : Map.of();
      for (Map.Entry<String, Object> t : topics.entrySet()) {
        Map<String, Object> spec = asMap(t.getValue());
        int physical =
            (int) num(spec.getOrDefault("physical", spec.get("initial")));
        List<Object> epochs = history.containsKey(t.getKey()) ? asList(history.get(t.getKey())) : List.of();
        int active = (int) num(spec.get("initial"));
        for (Object e : epochs) {
          active = Math.max(active, (int) num(asMap(e).get("to_active")));
        }
        kafka.partitions.put(t.getKey(), Math.max(physical, active));
        FakeStore.Topic ft = new FakeStore.Topic();
        ft.adopted = !Boolean.FALSE.equals(spec.get("adopted"));
        ft.ordered = !Boolean.FALSE.equals(spec.get("ordered"));
        ft.compacted = Boolean.TRUE.equals(spec.get("compacted"));
        ft.topicId = (String) spec.get("topic_id");
        ft.initial = (int) num(spec.get("initial"));
        ft.algorithm = (String) spec.getOrDefault("algorithm", "murmur3");
        for (Object e : epochs) {
          Map<String, Object> m = asMap(e);
          ft.epochs.put(num(m.get("epoch")), m);
        }
        store.topics.put(t.getKey(), ft);
      }
      if (scenario.containsKey("committed")) {
        for (Map.Entry<String, Object> t : asMap(scenario.get("committed")).entrySet()) {
          for (Map.Entry<String, Object> p : asMap(t.getValue()).entrySet()) {
            kafka.committed.put(new TopicPartition(t.getKey(), Integer.parseInt(p.getKey())), num(p.getValue()));
          }
        }
      }
      if (scenario.containsKey("log_start")) {
        for (Map.Entry<String, Object> t : asMap(scenario.get("log_start")).entrySet()) {
          for (Map.Entry<String, Object> p : asMap(t.getValue()).entrySet()) {
            kafka.logStart.put(new TopicPartition(t.getKey(), Integer.parseInt(p.getKey())), num(p.getValue()));
          }
        }
      }
    }

    record Step(List<List<Object>> records, boolean raised, RuntimeException error) {}

    static TopicPartition tp(Object o) {
      List<Object> l = asList(o);
      return new TopicPartition((String) l.get(0), (int) num(l.get(1)));
    }

    Step step(Map<String, Object> step) {
      String what = (String) step.get("do");
      try {
        switch (what) {
          case "subscribe": {
            List<String> names = new ArrayList<>();
            for (Object t : asList(step.get("topics"))) {
              names.add((String) t);
            }
            consumer.subscribe(names, new Listener(!Boolean.FALSE.equals(step.get("on_lost"))));
            return ok();
          }
          case "assign":
          case "incremental_assign": {
            List<TopicPartition> parts = new ArrayList<>();
            Map<TopicPartition, Object> at = new LinkedHashMap<>();
            for (Object o : asList(step.get("partitions"))) {
              List<Object> l = asList(o);
              TopicPartition tp = tp(o);
              parts.add(tp);
              if (l.size() > 2) {
                at.put(tp, l.get(2));
              }
            }
            if (what.equals("incremental_assign")) {
              Set<TopicPartition> all = new LinkedHashSet<>(kafka.assignment);
              all.addAll(parts);
              parts = new ArrayList<>(all);
            }
            consumer.assign(parts);
            for (Map.Entry<TopicPartition, Object> e : at.entrySet()) {
              if ("beginning".equals(e.getValue())) {
                consumer.seekToBeginning(List.of(e.getKey()));
              } else {
                consumer.seek(e.getKey(), num(e.getValue()));
              }
            }
            return ok();
          }
          case "unassign":
            consumer.assign(List.of());
            return ok();
          case "incremental_unassign": {
            Set<TopicPartition> keep = new LinkedHashSet<>(kafka.assignment);
            for (Object o : asList(step.get("partitions"))) {
              keep.remove(tp(o));
            }
            consumer.assign(keep);
            return ok();
          }
          case "poll":
          case "consume": {
            kafka.maxRecords =
                what.equals("poll") ? 1 : (int) num(step.getOrDefault("max", 100L));
            long timeout = num(step.getOrDefault("timeout_ms", 0L));
            ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(timeout));
            List<List<Object>> out = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : got) {
              out.add(List.of(r.topic(), (long) r.partition(), r.offset()));
            }
            return new Step(out, false, null);
          }
          case "seek": {
            List<Object> l = asList(step.get("partition"));
            consumer.seek(tp(l), num(l.get(2)));
            return ok();
          }
          case "pause":
          case "resume": {
            List<TopicPartition> parts = new ArrayList<>();
            for (Object o : asList(step.get("partitions"))) {
              parts.add(tp(o));
            }
            if (what.equals("pause")) {
              consumer.pause(parts);
            } else {
              consumer.resume(parts);
            }
            return ok();
          }
          case "commit": {
            if (step.containsKey("offsets")) {
              Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
              for (Object o : asList(step.get("offsets"))) {
                offsets.put(tp(o), new OffsetAndMetadata(num(asList(o).get(2))));
              }
              kafka.commitOf = "offsets";
              consumer.commitSync(offsets);
            } else {
              kafka.commitOf = "stored";
              consumer.commitSync();
            }
            return ok();
          }
          case "close":
            consumer.close();
            return ok();
          case "fetched":
            kafka.fetched(step);
            return ok();
          case "rebalance":
            kafka.rebalances.add(step);
            kafka.rebalanceIn.add((int) num(step.getOrDefault("during_call", 1L)));
            return ok();
          case "group_commit":
            for (Object o : asList(step.get("offsets"))) {
              kafka.committed.put(tp(o), num(asList(o).get(2)));
            }
            return ok();
          case "log_start":
            for (Object o : asList(step.get("offsets"))) {
              kafka.logStart.put(tp(o), num(asList(o).get(2)));
            }
            return ok();
          case "advance":
            kafka.clock += num(step.get("ms")) * 1_000_000L;
            return ok();
          case "publish": {
            Map<String, Object> epoch = new HashMap<>(asMap(step.get("epoch")));
            epoch.putIfAbsent("state", "pending");
            store.topics.get((String) step.get("topic")).epochs.put(num(epoch.get("epoch")), epoch);
            store.bump((String) step.get("topic"));
            return ok();
          }
          case "seal": {
            FakeStore.Topic t = store.topics.get((String) step.get("topic"));
            Map<String, Object> epoch = new HashMap<>(t.epochs.get(num(step.get("epoch"))));
            Map<String, Object> bounds = new TreeMap<>(asMap(epoch.getOrDefault("boundaries", Map.of())));
            bounds.putAll(asMap(step.get("boundaries")));
            epoch.put("boundaries", bounds);
            epoch.put("state", "sealed");
            t.epochs.put(num(step.get("epoch")), epoch);
            store.bump((String) step.get("topic"));
            return ok();
          }
          case "compact_history": {
            FakeStore.Topic t = store.topics.get((String) step.get("topic"));
            t.epochs.headMap(num(step.get("below"))).clear();
            store.bump((String) step.get("topic"));
            return ok();
          }
          case "rewind_marker":
            store.markers.merge((String) step.get("topic"), ++store.zxid, Math::max);
            store.markers.put((String) step.get("topic"), store.zxid);
            return ok();
          case "auto_commit":
            consumer.autoCommitNow();
            return ok();
          case "fail_commits":
            kafka.failCommits = (int) num(step.get("count"));
            return ok();
          case "listener_raises":
            if ("maybe_revoked".equals(step.get("callback"))) {
              raisesMaybe = (int) num(step.getOrDefault("times", 1L));
            } else {
              raisesAssigned = (int) num(step.getOrDefault("times", 1L));
            }
            return ok();
          case "zk_session":
            store.connected = "connected".equals(step.get("state"));
            return ok();
          case "delay_watches":
          case "watches_arrive":
          case "progress_record":
            // This consumer keeps no watches: the check finds every change (C-COPY-4 is a SHOULD).
            return ok();
          default:
            throw new Mismatch("step '" + what + "' is not driven here");
        }
      } catch (Mismatch m) {
        throw m;
      } catch (RuntimeException e) {
        return new Step(List.of(), true, e);
      }
    }

    static Step ok() {
      return new Step(List.of(), false, null);
    }

    void expect(int i, Map<String, Object> step, Map<String, Object> expect, Step got) {
      String where = scenario.get("name") + " step " + i + " (" + step.get("do") + ")";
      Object raises = expect.containsKey("raises") ? expect.get("raises") : Boolean.FALSE;
      if (raises != null && !raises.equals(got.raised())) {
        throw new Mismatch(where + ": raised " + got.raised() + (got.error() != null ? " " + got.error() : "") + ", expected " + raises);
      }
      if (expect.containsKey("records")) {
        List<List<Object>> want = new ArrayList<>();
        for (Object o : asList(expect.get("records"))) {
          List<Object> l = asList(o);
          want.add(List.of(l.get(0), num(l.get(1)), num(l.get(2))));
        }
        if (!want.equals(got.records())) {
          throw new Mismatch(where + ": records " + got.records() + ", expected " + want);
        }
      }
      if (expect.containsKey("held")) {
        Set<List<Object>> want = new HashSet<>();
        for (Object o : asList(expect.get("held"))) {
          List<Object> l = asList(o);
          want.add(List.of(l.get(0), num(l.get(1)), num(l.get(2))));
        }
        Set<List<Object>> have = new HashSet<>();
        for (Map.Entry<TopicPartition, Long> h : consumer.heldPartitions().entrySet()) {
          have.add(List.of(h.getKey().topic(), (long) h.getKey().partition(), h.getValue()));
        }
        if (!want.equals(have)) {
          throw new Mismatch(where + ": held " + have + ", expected " + want);
        }
      }
      if (expect.containsKey("waits")) {
        Map<TopicPartition, List<GateEvaluator.Wait>> waits = consumer.waits();
        for (Map.Entry<String, Object> w : asMap(expect.get("waits")).entrySet()) {
          TopicPartition tp = parseTp(w.getKey());
          List<List<Long>> want = new ArrayList<>();
          for (Object o : asList(w.getValue())) {
            List<Object> l = asList(o);
            want.add(List.of(num(l.get(0)), num(l.get(1)), num(l.get(2))));
          }
          List<List<Long>> have = new ArrayList<>();
          for (GateEvaluator.Wait x : waits.getOrDefault(tp, List.of())) {
            have.add(List.of((long) x.partition(), x.offset(), x.epoch()));
          }
          if (!want.equals(have)) {
            throw new Mismatch(where + ": waits of " + tp + " " + have + ", expected " + want);
          }
        }
      }
      if (expect.containsKey("client_paused")) {
        Set<TopicPartition> want = new HashSet<>();
        for (Object o : asList(expect.get("client_paused"))) {
          want.add(tp(o));
        }
        if (!want.equals(kafka.paused)) {
          throw new Mismatch(where + ": client paused " + kafka.paused + ", expected " + want);
        }
      }
      checkOffsets(where, "committed", expect, kafka.committed, false);
      checkOffsets(where, "committed_at_most", expect, kafka.committed, true);
      Map<TopicPartition, Long> stored = new HashMap<>();
      if (expect.containsKey("stored") || expect.containsKey("stored_at_most")) {
        consumer.stored().forEach((k, v) -> stored.put(k, v.offset()));
      }
      checkOffsets(where, "stored", expect, stored, false);
      checkOffsets(where, "stored_at_most", expect, stored, true);
      if (expect.containsKey("positions")) {
        for (Map.Entry<String, Object> p : asMap(expect.get("positions")).entrySet()) {
          long have = consumer.position(parseTp(p.getKey()));
          if (have != num(p.getValue())) {
            throw new Mismatch(where + ": position of " + p.getKey() + " " + have + ", expected " + p.getValue());
          }
        }
      }
      if (expect.containsKey("events")) {
        List<Object> want = new ArrayList<>();
        for (Object o : asList(expect.get("events"))) {
          want.add(normalEvent(asMap(o)));
        }
        List<Object> have = new ArrayList<>();
        for (Map<String, Object> e : events) {
          have.add(normalEvent(e));
        }
        if (!want.equals(have)) {
          throw new Mismatch(where + ": events " + have + ", expected " + want);
        }
      }
      if (expect.containsKey("checks")) {
        if (num(expect.get("checks")) != store.checks) {
          throw new Mismatch(where + ": " + store.checks + " checks, expected " + expect.get("checks"));
        }
      }
      if (expect.containsKey("zk_writes")) {
        List<Object> want = new ArrayList<>();
        for (Object o : asList(expect.get("zk_writes"))) {
          want.add(normalWrite(asMap(o)));
        }
        List<Object> have = new ArrayList<>();
        for (Map<String, Object> w : store.writes) {
          have.add(normalWrite(w));
        }
        if (!new HashSet<>(want).equals(new HashSet<>(have)) || want.size() != have.size()) {
          throw new Mismatch(where + ": zk writes " + have + ", expected " + want);
        }
      }
    }

    static Object normalWrite(Map<String, Object> w) {
      Map<String, Object> out = new TreeMap<>();
      for (Map.Entry<String, Object> e : w.entrySet()) {
        Object v = e.getValue();
        if (v instanceof Map) {
          Map<String, Long> m = new TreeMap<>();
          asMap(v).forEach((k, x) -> m.put(k, num(x)));
          v = m;
        } else if (v instanceof Number) {
          v = num(v);
        }
        out.put(e.getKey(), v);
      }
      return out;
    }

    /** An event without the commit's {@code of}: a seek-back consumer commits offsets only. */
    static Object normalEvent(Map<String, Object> e) {
      Map<String, Object> out = new TreeMap<>();
      String kind = (String) e.get("event");
      out.put("event", kind);
      Object list = e.containsKey("partitions") ? e.get("partitions") : e.get("offsets");
      List<List<Object>> items = new ArrayList<>();
      for (Object o : asList(list == null ? List.of() : list)) {
        List<Object> l = asList(o);
        List<Object> item = new ArrayList<>();
        item.add(l.get(0));
        for (int i = 1; i < l.size(); i++) {
          item.add(num(l.get(i)));
        }
        items.add(item);
      }
      items.sort((a, b) -> a.toString().compareTo(b.toString()));
      out.put("items", items);
      return out;
    }

    static TopicPartition parseTp(String s) {
      int slash = s.lastIndexOf('/');
      return new TopicPartition(s.substring(0, slash), Integer.parseInt(s.substring(slash + 1)));
    }

    static void checkOffsets(
        String where, String key, Map<String, Object> expect, Map<TopicPartition, Long> have, boolean atMost) {
      if (!expect.containsKey(key)) {
        return;
      }
      for (Map.Entry<String, Object> e : asMap(expect.get(key)).entrySet()) {
        Long h = have.get(parseTp(e.getKey()));
        Object w = e.getValue();
        boolean good =
            w == null ? h == null : atMost ? (h == null || h <= num(w)) : (h != null && h == num(w));
        if (!good) {
          throw new Mismatch(where + ": " + key + " of " + e.getKey() + " is " + h + ", expected " + w);
        }
      }
    }

    /** The key listener and the recording rebalance callbacks of a {@code subscribe} step. */
    final class Listener implements OrderedConsumerRebalanceListener {
      final boolean onLost;

      Listener(boolean onLost) {
        this.onLost = onLost;
      }

      private List<List<Object>> items(Map<TopicPartition, Long> m) {
        List<List<Object>> out = new ArrayList<>();
        m.forEach((k, v) -> out.add(List.of(k.topic(), (long) k.partition(), v)));
        return out;
      }

      private List<List<Object>> items(Collection<TopicPartition> c) {
        List<List<Object>> out = new ArrayList<>();
        for (TopicPartition k : c) {
          out.add(List.of(k.topic(), (long) k.partition()));
        }
        return out;
      }

      @Override
      public void onPartitionKeyMaybeRevoked(Map<TopicPartition, Long> partitions) {
        events.add(Map.of("event", "maybe_revoked", "partitions", items(partitions)));
        if (raisesMaybe > 0) {
          raisesMaybe--;
          throw new IllegalStateException("the listener raises");
        }
      }

      @Override
      public void onPartitionKeyAssigned(Map<TopicPartition, Long> partitions) {
        events.add(Map.of("event", "assigned", "partitions", items(partitions)));
        if (raisesAssigned > 0) {
          raisesAssigned--;
          throw new IllegalStateException("the listener raises");
        }
      }

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        events.add(Map.of("event", "on_revoke", "partitions", items(partitions)));
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        events.add(Map.of("event", "on_assign", "partitions", items(partitions)));
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> partitions) {
        events.add(Map.of("event", onLost ? "on_lost" : "on_revoke", "partitions", items(partitions)));
      }
    }

    /** A Kafka client over a log per partition; what the scenarios' world says happens. */
    final class FakeKafka {
      long clock = 1_000_000_000L;
      boolean autoCommit;
      int maxRecords = 100;
      int failCommits;
      String commitOf = "offsets";
      final Map<String, Integer> partitions = new HashMap<>();
      final Map<TopicPartition, TreeMap<Long, ConsumerRecord<byte[], byte[]>>> log = new HashMap<>();
      final Map<TopicPartition, Long> high = new HashMap<>();
      final Map<TopicPartition, Long> committed = new HashMap<>();
      final Map<TopicPartition, Long> logStart = new HashMap<>();
      final Set<TopicPartition> assignment = new LinkedHashSet<>();
      final Map<TopicPartition, Long> position = new HashMap<>();
      final Set<TopicPartition> paused = new HashSet<>();
      final List<Map<String, Object>> pendingFetches = new ArrayList<>();
      final List<Integer> fetchIn = new ArrayList<>();
      final List<Map<String, Object>> rebalances = new ArrayList<>();
      final List<Integer> rebalanceIn = new ArrayList<>();
      ConsumerRebalanceListener listener;

      @SuppressWarnings("unchecked")
      Consumer<byte[], byte[]> proxy() {
        return (Consumer<byte[], byte[]>)
            Proxy.newProxyInstance(
                Consumer.class.getClassLoader(),
                new Class<?>[] {Consumer.class},
                (p, m, a) -> call(m.getName(), a == null ? new Object[0] : a));
      }

      void fetched(Map<String, Object> step) {
        int in = (int) num(step.getOrDefault("during_call", 0L));
        if (in > 0) {
          pendingFetches.add(step);
          fetchIn.add(in);
          return;
        }
        add(step);
      }

      void add(Map<String, Object> step) {
        for (Object o : asList(step.get("records"))) {
          Map<String, Object> r = asMap(o);
          TopicPartition tp = new TopicPartition((String) r.get("topic"), (int) num(r.get("partition")));
          List<Long> offsets = new ArrayList<>();
          if (r.containsKey("offsets")) {
            for (Object x : asList(r.get("offsets"))) {
              offsets.add(num(x));
            }
          } else {
            for (long x = num(r.get("from")); x <= num(r.get("to")); x++) {
              offsets.add(x);
            }
          }
          for (int i = 0; i < offsets.size(); i++) {
            String kind = "record";
            Object kinds = r.get("kind");
            if (kinds instanceof String) {
              kind = (String) kinds;
            } else if (kinds instanceof List) {
              kind = (String) asList(kinds).get(i);
            }
            byte[] key = null;
            Object keys = r.get("keys");
            if (keys instanceof List) {
              Object k = asList(keys).get(i);
              key = k == null ? null : ((String) k).getBytes(StandardCharsets.UTF_8);
            }
            RecordHeaders headers = new RecordHeaders();
            if (r.get("headers") instanceof List) {
              for (Object h : asList(r.get("headers"))) {
                List<Object> hv = asList(h);
                headers.add((String) hv.get(0), String.valueOf(hv.get(1)).getBytes(StandardCharsets.UTF_8));
              }
            }
            if (kind.equals("tombstone_copy")) {
              headers.add("ordered.tombstone", new byte[0]);
            }
            byte[] value = kind.equals("record") ? new byte[] {'v'} : null;
            long off = offsets.get(i);
            log.computeIfAbsent(tp, k -> new TreeMap<>())
                .put(off, new ConsumerRecord<>(tp.topic(), tp.partition(), off, 0L, TimestampType.CREATE_TIME,
                    -1, -1, key, value, headers, Optional.empty()));
            high.merge(tp, off + 1, Math::max);
          }
        }
        if (step.get("high") instanceof Map) {
          for (Map.Entry<String, Object> h : asMap(step.get("high")).entrySet()) {
            high.merge(parseTp(h.getKey()), num(h.getValue()), Math::max);
          }
        }
      }

      long startOf(TopicPartition tp) {
        Long c = committed.get(tp);
        return c != null ? c : logStart.getOrDefault(tp, 0L);
      }

      void duringCall() {
        for (int i = 0; i < fetchIn.size(); i++) {
          if (fetchIn.get(i) == 1) {
            add(pendingFetches.get(i));
          }
          fetchIn.set(i, fetchIn.get(i) - 1);
        }
        for (int i = 0; i < rebalanceIn.size(); i++) {
          if (rebalanceIn.get(i) == 1) {
            rebalance(rebalances.get(i));
          }
          rebalanceIn.set(i, rebalanceIn.get(i) - 1);
        }
      }

      void rebalance(Map<String, Object> step) {
        for (String kind : List.of("revoke", "lost")) {
          if (!step.containsKey(kind)) {
            continue;
          }
          List<TopicPartition> parts = new ArrayList<>();
          for (Object o : asList(step.get(kind))) {
            parts.add(tp(o));
          }
          if (kind.equals("revoke")) {
            listener.onPartitionsRevoked(parts);
          } else {
            listener.onPartitionsLost(parts);
          }
          for (TopicPartition tp : parts) {
            assignment.remove(tp);
            position.remove(tp);
          }
        }
        if (step.containsKey("assign")) {
          List<TopicPartition> parts = new ArrayList<>();
          for (Object o : asList(step.get("assign"))) {
            TopicPartition tp = tp(o);
            parts.add(tp);
            assignment.add(tp);
            position.put(tp, startOf(tp));
          }
          listener.onPartitionsAssigned(parts);
        }
      }

      ConsumerRecords<byte[], byte[]> poll(Duration timeout) {
        duringCall();
        Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> out = new LinkedHashMap<>();
        int left = maxRecords;
        for (TopicPartition tp : assignment) {
          if (paused.contains(tp) || left == 0) {
            continue;
          }
          long pos = position.computeIfAbsent(tp, this::startOf);
          TreeMap<Long, ConsumerRecord<byte[], byte[]>> l = log.get(tp);
          if (l == null) {
            continue;
          }
          List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
          for (ConsumerRecord<byte[], byte[]> r : l.tailMap(pos, true).values()) {
            if (left == 0) {
              break;
            }
            got.add(r);
            left--;
            pos = r.offset() + 1;
          }
          if (!got.isEmpty()) {
            out.put(tp, got);
            position.put(tp, pos);
          }
        }
        if (out.isEmpty()) {
          clock += Math.min(timeout.toNanos(), 1_000_000_000L);
        }
        return OrderedKafkaConsumer.records(out, Map.of());
      }

      void commit(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<List<Object>> items = new ArrayList<>();
        offsets.forEach((k, v) -> items.add(List.of(k.topic(), (long) k.partition(), v.offset())));
        if (failCommits > 0) {
          failCommits--;
          events.add(Map.of("event", "commit_failed", "offsets", items));
          throw new KafkaException("the commit failed (scenario)");
        }
        offsets.forEach((k, v) -> committed.put(k, v.offset()));
        events.add(Map.of("event", "commit", "offsets", items));
      }

      @SuppressWarnings("unchecked")
      /** How often each method of the client was called (tests of the round trips a hold costs). */
      final Map<String, Integer> calls = new HashMap<>();

      Object call(String name, Object[] a) {
        calls.merge(name, 1, Integer::sum);
        switch (name) {
          case "assignment":
            return Set.copyOf(assignment);
          case "subscription":
            return Set.of();
          case "subscribe":
            listener = (ConsumerRebalanceListener) a[1];
            return null;
          case "assign": {
            Set<TopicPartition> next = new LinkedHashSet<>((Collection<TopicPartition>) a[0]);
            position.keySet().retainAll(next);
            assignment.clear();
            assignment.addAll(next);
            return null;
          }
          case "unsubscribe":
            assignment.clear();
            position.clear();
            return null;
          case "poll":
            return poll((Duration) a[0]);
          case "commitSync":
          case "commitAsync":
            if (a.length > 0 && a[0] instanceof Map) {
              commit((Map<TopicPartition, OffsetAndMetadata>) a[0]);
            }
            return null;
          case "seek":
            position.put((TopicPartition) a[0], a[1] instanceof OffsetAndMetadata
                ? ((OffsetAndMetadata) a[1]).offset() : (Long) a[1]);
            return null;
          case "seekToEnd":
            for (TopicPartition tp : (Collection<TopicPartition>) a[0]) {
              position.put(tp, high.getOrDefault(tp, 0L));
            }
            return null;
          case "position": {
            TopicPartition tp = (TopicPartition) a[0];
            return position.computeIfAbsent(tp, this::startOf);
          }
          case "committed": {
            Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
            for (TopicPartition tp : (Set<TopicPartition>) a[0]) {
              Long c = committed.get(tp);
              if (c != null) {
                out.put(tp, new OffsetAndMetadata(c));
              }
            }
            return out;
          }
          case "beginningOffsets": {
            Map<TopicPartition, Long> out = new HashMap<>();
            for (TopicPartition tp : (Collection<TopicPartition>) a[0]) {
              out.put(tp, logStart.getOrDefault(tp, 0L));
            }
            return out;
          }
          case "endOffsets": {
            Map<TopicPartition, Long> out = new HashMap<>();
            for (TopicPartition tp : (Collection<TopicPartition>) a[0]) {
              out.put(tp, high.getOrDefault(tp, 0L));
            }
            return out;
          }
          case "currentLag": {
            TopicPartition tp = (TopicPartition) a[0];
            Long pos = position.get(tp);
            return pos == null || !high.containsKey(tp)
                ? OptionalLong.empty()
                : OptionalLong.of(high.get(tp) - pos);
          }
          case "paused":
            return Set.copyOf(paused);
          case "pause":
            paused.addAll((Collection<TopicPartition>) a[0]);
            return null;
          case "resume":
            paused.removeAll((Collection<TopicPartition>) a[0]);
            return null;
          case "close":
            if (listener != null && !assignment.isEmpty()) {
              listener.onPartitionsRevoked(new ArrayList<>(assignment));
            }
            assignment.clear();
            return null;
          case "wakeup":
          case "hashCode":
            return 0;
          case "toString":
            return "FakeKafka";
          default:
            throw new UnsupportedOperationException(name);
        }
      }
    }
  }

  /** The layout store: histories with a change counter, rewind markers, the writes. */
  static final class FakeStore implements ConsumerStore {
    static final class Topic {
      boolean adopted = true;
      boolean ordered = true;
      boolean compacted;
      String topicId;
      int initial;
      String algorithm = "murmur3";
      long mzxid = 1;
      final TreeMap<Long, Map<String, Object>> epochs = new TreeMap<>();
    }

    final Map<String, Topic> topics = new HashMap<>();
    final Map<String, Long> markers = new HashMap<>();
    final List<Map<String, Object>> writes = new ArrayList<>();
    final Map<String, Map<Integer, Long>> interests = new HashMap<>();
    final Map<String, Long> published = new HashMap<>();
    final Set<String> registered = new TreeSet<>();
    long zxid = 100;
    int checks;
    boolean connected = true;

    void bump(String topic) {
      topics.get(topic).mzxid = ++zxid;
    }

    @Override
    public boolean connected() {
      return connected;
    }

    @Override
    public LayoutHistories.History read(String topic) {
      if (!connected) {
        throw new KafkaException("ZooKeeper is away (scenario)");
      }
      Topic t = topics.get(topic);
      if (t == null || !t.adopted) {
        return new LayoutHistories.History(topic, false, List.of(), t == null ? -1 : t.mzxid, false);
      }
      List<EpochInfo> epochs = new ArrayList<>();
      for (Map<String, Object> e : t.epochs.values()) {
        epochs.add(EpochInfo.fromJson(e));
      }
      return new LayoutHistories.History(
          topic, t.ordered, epochs, t.mzxid, t.compacted, t.topicId, t.initial, t.algorithm);
    }

    @Override
    public Check check(Collection<String> names, String group, Collection<String> marks, long timeoutMs) {
      if (!connected) {
        throw new KafkaException("ZooKeeper is away (scenario)");
      }
      checks++;
      Map<String, Long> t = new HashMap<>();
      for (String n : names) {
        Topic topic = topics.get(n);
        t.put(n, topic == null ? -1L : topic.mzxid);
      }
      Map<String, Long> m = new HashMap<>();
      if (group != null) {
        for (String n : marks) {
          m.put(n, markers.getOrDefault(n, -1L));
        }
      }
      return new Check(t, m);
    }

    @Override
    public long markRewound(String group, String topic) {
      writes.add(Map.of("event", "rewind_marker", "topic", topic));
      markers.put(topic, ++zxid);
      return zxid;
    }

    @Override
    public void registerGroup(String group, String topic) {
      if (registered.add(topic)) {
        writes.add(Map.of("event", "group_registered", "topic", topic));
      }
    }

    @Override
    public void declareInterest(String group, String topic, String member, Map<Integer, Long> waits) {
      Map<String, Object> w = new HashMap<>();
      w.put("event", "interest");
      w.put("topic", topic);
      if (waits.isEmpty()) {
        w.put("waits", null);
        interests.remove(topic);
      } else {
        Map<String, Object> m = new TreeMap<>();
        waits.forEach((k, v) -> m.put(String.valueOf(k), v));
        w.put("waits", m);
        interests.put(topic, Map.copyOf(waits));
      }
      writes.add(w);
    }

    @Override
    public void publishProgress(String group, String topic, int partition, long offset) {
      Map<Integer, Long> wanted = interests.getOrDefault(topic, Map.of());
      String key = topic + "/" + partition;
      if (!wanted.containsKey(partition) || offset <= published.getOrDefault(key, -1L)) {
        return;
      }
      published.put(key, offset);
      writes.add(Map.of("event", "progress", "topic", topic, "partition", (long) partition, "offset", offset));
    }

    @Override
    public void close() {}
  }
}

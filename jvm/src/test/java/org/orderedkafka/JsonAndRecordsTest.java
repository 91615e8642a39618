package org.orderedkafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The records' JSON: sorted keys, Python's field names, versions checked on read. */
class JsonAndRecordsTest {
  @Test
  void producerRecordVersion2() {
    String json =
        new String(Records.producerRecord("p-h-1-ab", "h", 42, 120000, 1700000000.5, "svc"), StandardCharsets.UTF_8);
    assertEquals(
        "{\"client_id\":\"svc\",\"delivery_timeout_ms\":120000,\"host\":\"h\",\"id\":\"p-h-1-ab\","
            + "\"language\":\"java\",\"pid\":42,\"registered_at\":1700000000.5,\"version\":2}",
        json);
  }

  @Test
  void groupMemberRecordVersion1() {
    String json =
        new String(
            Records.groupMemberRecord("h-42-0000abcd", "g", "svc", "h", 42, 1700000000.5),
            StandardCharsets.UTF_8);
    assertEquals(
        "{\"client_id\":\"svc\",\"group\":\"g\",\"host\":\"h\",\"language\":\"java\","
            + "\"member\":\"h-42-0000abcd\",\"pid\":42,\"registered_at\":1700000000.5,\"version\":1}",
        json);
  }

  @Test
  void ackRecord() {
    Map<Integer, Long> offsets = new TreeMap<>(Map.of(10, 5L, 2, 7L));
    String json = new String(Records.ackRecord("p", 3, offsets, 1700000000.0), StandardCharsets.UTF_8);
    assertEquals(
        "{\"acked_at\":1700000000.0,\"epoch\":3,\"id\":\"p\",\"last_offsets\":{\"10\":5,\"2\":7},\"version\":1}",
        json);
  }

  @Test
  void topicRecordVersions() {
    String v2 =
        "{\"active\":3,\"adopted_at\":1.5,\"algorithm\":\"murmur3\",\"compacted\":false,\"epoch\":4,"
            + "\"initial\":2,\"ordered\":true,\"pending\":4,\"physical\":4,\"topic\":\"t\","
            + "\"topic_id\":\"abc\",\"version\":2}";
    Records.TopicRecord r = Records.TopicRecord.parse(v2.getBytes(StandardCharsets.UTF_8), "/x");
    assertEquals(3, r.active);
    assertEquals(4, r.pending);
    assertEquals("abc", r.topicId);
    String v1 = v2.replace(",\"topic_id\":\"abc\"", "").replace("\"version\":2", "\"version\":1");
    assertNull(Records.TopicRecord.parse(v1.getBytes(StandardCharsets.UTF_8), "/x").topicId);
    String v3 = v2.replace("\"version\":2", "\"version\":3");
    Records.CorruptRecordException exc =
        assertThrows(
            Records.CorruptRecordException.class,
            () -> Records.TopicRecord.parse(v3.getBytes(StandardCharsets.UTF_8), "/x"));
    assertEquals(
        "/x: TopicRecord has version 3, newer than 2, the newest this ordered-kafka reads: a"
            + " newer ordered-kafka wrote it; upgrade this client (see \"Upgrading\" in"
            + " docs/operations.md)",
        exc.getMessage());
    String v0 = v2.replace("\"version\":2", "\"version\":0");
    Records.CorruptRecordException old =
        assertThrows(
            Records.CorruptRecordException.class,
            () -> Records.TopicRecord.parse(v0.getBytes(StandardCharsets.UTF_8), "/x"));
    assertEquals("/x: has version 0; this ordered reads version 1, 2", old.getMessage());
    assertNull(Records.TopicRecord.parse(new byte[0], "/x"));
  }

  @Test
  void jsonRoundTrip() {
    Object parsed = Json.parse("{\"a\":[1,2.5,\"\\u00e9\\n\",null,true],\"b\":{}}");
    assertEquals("{\"a\":[1,2.5,\"\\u00e9\\n\",null,true],\"b\":{}}", Json.write(parsed));
    assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\":}"));
    assertTrue(Json.parse("12345678901234567890") instanceof java.math.BigInteger);
  }

  @Test
  void aclRulesOfARegistration() {
    Records.AclPolicy policy =
        new Records.AclPolicy(
            java.util.List.of("digest:coord:H1="),
            java.util.List.of("digest:producer:H2="),
            java.util.List.of(),
            java.util.List.of("digest:reader:H3="));
    var acl = AclRules.aclFor(policy, "/ordered", "/ordered/topics/t/producers/p-1");
    assertEquals(
        "[31:digest:coord:H1=, 1:digest:producer:H2=, 1:digest:reader:H3=, 15:auth:]",
        acl.stream().map(a -> a.getPerms() + ":" + a.getId().getScheme() + ":" + a.getId().getId()).toList().toString());
    var producers = AclRules.aclFor(policy, "/ordered", "/ordered/topics/t/producers");
    assertEquals(5, producers.stream().filter(a -> a.getId().getId().startsWith("producer")).findFirst().get().getPerms());
    assertNull(AclRules.aclFor(policy, "/ordered", "/other/topics/t"));
  }
}

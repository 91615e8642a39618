package org.orderedkafka;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;

/**
 * The ACL every node the plugins create gets, as {@code coordinator/kernel/zk_acl.py}'s
 * {@code acl_for_new} gives it (docs/security.md, "ACLs on the tree, by role").
 *
 * <p>Under a root with a policy ({@code {root}/acl}): every listed identity may read, the
 * coordinator identities may do everything, producers may also create under
 * {@code topics/{t}/producers} and {@code .../acks}, and a node a producer creates for
 * itself (its registration, its ack) is owned by its creator through ZooKeeper's
 * {@code auth} scheme (read, write, create, delete; never ADMIN). Without a policy, or
 * outside every known root: the open ACL, as kazoo's default.
 */
final class AclRules implements ACLProvider {
  static final int OWNER_PERMS =
      ZooDefs.Perms.READ | ZooDefs.Perms.WRITE | ZooDefs.Perms.CREATE | ZooDefs.Perms.DELETE;

  /** Root -> its policy as last read (absent: no policy, an open tree). */
  final Map<String, Records.AclPolicy> policies = new ConcurrentHashMap<>();

  @Override
  public List<ACL> getDefaultAcl() {
    return ZooDefs.Ids.OPEN_ACL_UNSAFE;
  }

  @Override
  public List<ACL> getAclForPath(String path) {
    for (Map.Entry<String, Records.AclPolicy> e : policies.entrySet()) {
      List<ACL> acl = aclFor(e.getValue(), e.getKey(), path);
      if (acl != null) {
        return acl;
      }
    }
    return ZooDefs.Ids.OPEN_ACL_UNSAFE;
  }

  enum Kind {
    OTHER,
    PRODUCERS,
    REGISTRATION,
    ACKS,
    ACK,
    GROUP
  }

  /** The kind of {@code path} under {@code root}, or null outside it. */
  static Kind classify(String root, String path) {
    String base = root.equals("/") ? "" : root;
    if (!path.equals(root) && !path.startsWith(base + "/")) {
      return null;
    }
    List<String> parts = new ArrayList<>();
    for (String p : path.substring(base.length()).split("/")) {
      if (!p.isEmpty()) {
        parts.add(p);
      }
    }
    int n = parts.size();
    if (n >= 1 && parts.get(0).equals("groups")) {
      return Kind.GROUP;
    }
    if (n >= 3 && parts.get(0).equals("topics") && parts.get(2).equals("producers")) {
      if (n == 3) {
        return Kind.PRODUCERS;
      }
      if (n == 4) {
        return Kind.REGISTRATION;
      }
    }
    if (n >= 5 && parts.get(0).equals("topics") && parts.get(2).equals("epochs") && parts.get(4).equals("acks")) {
      if (n == 5) {
        return Kind.ACKS;
      }
      if (n == 6) {
        return Kind.ACK;
      }
    }
    return Kind.OTHER;
  }

  static List<ACL> aclFor(Records.AclPolicy policy, String root, String path) {
    Kind kind = classify(root, path);
    if (kind == null) {
      return null;
    }
    switch (kind) {
      case PRODUCERS:
      case ACKS:
        return base(policy, ZooDefs.Perms.CREATE);
      case REGISTRATION:
      case ACK:
        List<ACL> owned = base(policy, 0);
        owned.add(new ACL(OWNER_PERMS, new Id("auth", "")));
        return owned;
      default:
        return base(policy, 0);
    }
  }

  /** READ for every listed identity, {@code producerExtra} on top for producers, ALL for coordinators. */
  private static List<ACL> base(Records.AclPolicy policy, int producerExtra) {
    Map<String, Integer> perms = new LinkedHashMap<>();
    for (List<String> role : List.of(policy.coordinator, policy.producers, policy.consumers, policy.readers)) {
      for (String ident : role) {
        perms.putIfAbsent(ident, ZooDefs.Perms.READ);
      }
    }
    for (String ident : policy.producers) {
      perms.put(ident, perms.get(ident) | producerExtra);
    }
    for (String ident : policy.coordinator) {
      perms.put(ident, ZooDefs.Perms.ALL);
    }
    List<ACL> out = new ArrayList<>();
    for (Map.Entry<String, Integer> e : perms.entrySet()) {
      String ident = e.getKey();
      int colon = ident.indexOf(':');
      out.add(new ACL(e.getValue(), new Id(ident.substring(0, colon), ident.substring(colon + 1))));
    }
    return out;
  }
}

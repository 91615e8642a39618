package org.orderedkafka;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.List;

/**
 * Which partitions feed which when the active count changes ({@code linear_hash.flow}):
 * {@code key_flow}, {@code sources} and {@code blockers}. The producer does not need them;
 * they are here so that the golden vectors check the whole linear-hashing kernel on the JVM.
 */
public final class Flow {
  private Flow() {}

  /** Every {@code [source, destination]} pair keys move along from {@code from} to {@code to} active. */
  public static List<int[]> keyFlow(int initial, int from, int to) {
    check(initial, from, to);
    List<int[]> out = new ArrayList<>();
    if (to > from) {
      for (int b = from; b < to; b++) {
        out.add(new int[] {Layout.route(b, initial, from), b});
      }
      out.sort((x, y) -> x[0] != y[0] ? Integer.compare(x[0], y[0]) : Integer.compare(x[1], y[1]));
      return out;
    }
    for (int b = to; b < from; b++) {
      out.add(new int[] {b, Layout.route(b, initial, to)});
    }
    return out;
  }

  /** The partitions whose keys flow into {@code partition} at the change, ascending. */
  public static List<Integer> sources(int partition, int initial, int from, int to) {
    check(initial, from, to);
    List<Integer> out = new ArrayList<>();
    if (to > from) {
      if (from <= partition && partition < to) {
        out.add(Layout.route(partition, initial, from));
      }
      return out;
    }
    if (partition >= to) {
      return out;
    }
    Deque<Integer> stack = new ArrayDeque<>();
    for (int c : Layout.childrenBelow(partition, initial, from)) {
      if (c >= to) {
        stack.push(c);
      }
    }
    while (!stack.isEmpty()) {
      int node = stack.pop();
      out.add(node);
      for (int c : Layout.childrenBelow(node, initial, from)) {
        stack.push(c);
      }
    }
    Collections.sort(out);
    return out;
  }

  /** KIP-253's tree form of the dependency: what {@code partition} waits on at the change. */
  public static List<Integer> blockers(int partition, int initial, int from, int to) {
    check(initial, from, to);
    List<Integer> out = new ArrayList<>();
    if (to > from) {
      if (from <= partition && partition < to) {
        out.add(Layout.route(partition, initial, from));
      }
      return out;
    }
    for (int c : Layout.childrenBelow(partition, initial, from)) {
      if (c >= to) {
        out.add(c);
      }
    }
    return out;
  }

  private static void check(int initial, int from, int to) {
    new Layout(initial, from, 0);
    new Layout(initial, to, 0);
  }
}

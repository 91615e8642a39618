package org.orderedkafka;

/**
 * One epoch's linear-hashing layout of a topic ({@code linear_hash.Layout}): {@code initial}
 * partitions at adoption, {@code active} partitions now. A hash {@code h} goes to
 * {@code h mod N*2^(L+1)}, folded back by {@code N*2^L} when that is not active.
 * Immutable; the moduli are computed once.
 */
public final class Layout {
  private final int initial;
  private final int active;
  private final long epoch;
  private final long low;
  private final long high;

  /**
   * @throws IllegalArgumentException {@code initial < 1}, {@code active < initial}, or a negative epoch
   */
  public Layout(int initial, int active, long epoch) {
    if (initial < 1) {
      throw new IllegalArgumentException("initial must be >= 1, got " + initial);
    }
    if (active < initial) {
      throw new IllegalArgumentException(
          "active must be >= initial (" + initial + "), got " + active);
    }
    if (epoch < 0) {
      throw new IllegalArgumentException("epoch must be >= 0, got " + epoch);
    }
    this.initial = initial;
    this.active = active;
    this.epoch = epoch;
    long[] m = moduli(initial, active);
    this.low = m[0];
    this.high = m[1];
  }

  /** {@code (N*2^L, N*2^(L+1))} with L largest such that {@code N*2^L <= active}. */
  static long[] moduli(int initial, int active) {
    int bits = 32 - Integer.numberOfLeadingZeros(active / initial); // Python's int.bit_length()
    long high = ((long) initial) << bits;
    return new long[] {high >> 1, high};
  }

  public int initial() {
    return initial;
  }

  public int active() {
    return active;
  }

  public long epoch() {
    return epoch;
  }

  /** The partition of a non-negative hash (or of a partition index: its active ancestor). */
  public int route(long h) {
    if (h < 0) {
      throw new IllegalArgumentException("h must be >= 0, got " + h);
    }
    long r = h % high;
    return (int) (r >= active ? r - low : r);
  }

  /** The partition of serialized key bytes hashed with {@code algorithm}. */
  public int partitionFor(byte[] key, String algorithm) {
    return route(Hashing.hash(key, algorithm));
  }

  /** {@code linear_hash.route(h, initial, active)}. */
  public static int route(long h, int initial, int active) {
    return new Layout(initial, active, 0).route(h);
  }

  /** {@code linear_hash.parent}: the partition {@code p} was split from, or -1 for an initial one. */
  public static int parent(int partition, int initial) {
    if (partition < 0 || initial < 1) {
      throw new IllegalArgumentException("partition must be >= 0 and initial >= 1");
    }
    if (partition < initial) {
      return -1;
    }
    int bits = 32 - Integer.numberOfLeadingZeros(partition / initial);
    return (int) (partition - (((long) initial) << (bits - 1)));
  }

  /** {@code linear_hash.children}: direct children of {@code partition} below {@code active}, ascending. */
  public static int[] children(int partition, int initial, int active) {
    new Layout(initial, active, 0); // checks the counts
    if (partition < 0) {
      throw new IllegalArgumentException("partition must be >= 0, got " + partition);
    }
    return childrenBelow(partition, initial, active);
  }

  static int[] childrenBelow(int partition, int initial, long bound) {
    long step = initial;
    while (step <= partition) {
      step <<= 1;
    }
    java.util.ArrayList<Integer> out = new java.util.ArrayList<>();
    long child = partition + step;
    while (child < bound) {
      out.add((int) child);
      step <<= 1;
      child = partition + step;
    }
    return out.stream().mapToInt(Integer::intValue).toArray();
  }

  @Override
  public String toString() {
    return "Layout(initial=" + initial + ", active=" + active + ", epoch=" + epoch + ")";
  }
}

package org.orderedkafka.gate;

import java.util.Map;

/** Where the gates read the group's progress from (Python's {@code OffsetView}). */
public interface OffsetView {
  /** The group's committed offset on {@code partition}, or null if none. */
  Long committed(int partition);

  /** The log start offset (low watermark) of {@code partition}. */
  long logStart(int partition);

  /** A view held in two maps: an absent committed offset is none, an absent log start is 0. */
  static OffsetView of(Map<Integer, Long> committed, Map<Integer, Long> logStarts) {
    return new OffsetView() {
      @Override
      public Long committed(int partition) {
        return committed.get(partition);
      }

      @Override
      public long logStart(int partition) {
        Long start = logStarts.get(partition);
        return start == null ? 0L : start;
      }
    };
  }
}

package org.orderedkafka.connect;

import java.util.function.Supplier;

/**
 * Runs a call into the wrapped connector or task with the thread's context class loader set
 * to the wrapped plugin's own loader, as the worker does when it calls a connector directly.
 * The worker sets the wrapper's loader around its calls; a wrapped connector that loads
 * through the context loader (service loaders, JDBC drivers, its own resources) would not
 * find its plugin's classes there.
 */
final class DelegateLoader {
  private DelegateLoader() {}

  /** {@code call} under {@code delegate}'s loader; the loader in place before is restored. */
  static <T> T call(Object delegate, Supplier<T> call) {
    Thread thread = Thread.currentThread();
    ClassLoader previous = thread.getContextClassLoader();
    ClassLoader own = delegate.getClass().getClassLoader();
    if (own != null) {
      thread.setContextClassLoader(own);
    }
    try {
      return call.get();
    } finally {
      thread.setContextClassLoader(previous);
    }
  }

  /** {@code run} under {@code delegate}'s loader, as {@link #call}. */
  static void run(Object delegate, Runnable run) {
    call(
        delegate,
        () -> {
          run.run();
          return null;
        });
  }
}

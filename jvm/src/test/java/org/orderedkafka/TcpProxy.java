package org.orderedkafka;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A loopback TCP proxy in front of ZooKeeper, so a test can cut the plugins' session
 * ({@link #stop}) and give it back on the same port ({@link #start}) without touching the
 * shared server.
 */
final class TcpProxy implements AutoCloseable {
  private final String targetHost;
  private final int targetPort;
  private int port;
  private volatile ServerSocket server;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();

  TcpProxy(String target) {
    String first = target.split(",")[0];
    int colon = first.lastIndexOf(':');
    targetHost = first.substring(0, colon);
    targetPort = Integer.parseInt(first.substring(colon + 1).split("/")[0]);
  }

  int port() {
    return port;
  }

  synchronized void start() throws IOException {
    ServerSocket s = new ServerSocket();
    s.setReuseAddress(true);
    s.bind(new InetSocketAddress("127.0.0.1", port));
    port = s.getLocalPort();
    server = s;
    Thread accept = new Thread(() -> accept(s), "tcp-proxy-accept");
    accept.setDaemon(true);
    accept.start();
  }

  private void accept(ServerSocket s) {
    while (!s.isClosed()) {
      try {
        Socket in = s.accept();
        Socket out = new Socket(targetHost, targetPort);
        sockets.add(in);
        sockets.add(out);
        pump(in, out);
        pump(out, in);
      } catch (IOException closed) {
        return;
      }
    }
  }

  private void pump(Socket from, Socket to) {
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[8192];
              try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) >= 0) {
                  out.write(buf, 0, n);
                  out.flush();
                }
              } catch (IOException ignored) {
                // a side closed
              }
              closeQuietly(from);
              closeQuietly(to);
            },
            "tcp-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  /** Refuse new connections and cut every open one. */
  synchronized void stop() {
    if (server != null) {
      closeQuietly(server);
      server = null;
    }
    for (Socket s : sockets) {
      closeQuietly(s);
    }
    sockets.clear();
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception ignored) {
      // closing
    }
  }

  @Override
  public void close() {
    stop();
  }
}

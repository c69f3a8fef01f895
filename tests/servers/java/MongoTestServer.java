// Minimal launcher for mongo-java-server (in-memory backend), used by the
// mongoelector test suite (see ../testserver.sh).
//
// Usage: java -cp 'lib/*:classes' MongoTestServer [PORT] [--wire-version=N] [--exit-on-stdin-eof]
//
//   PORT                 TCP port to bind on 127.0.0.1 (0 or absent = pick a free one)
//   --wire-version=N     report maxWireVersion N instead of mongo-java-server's own
//                        (8 with version "5.0.0"; real MongoDB 5.0 reports 13).
//                        PyMongo >= 4.18 refuses servers below wire version 9.
//                        Only the advertised number changes, not the behaviour.
//   --exit-on-stdin-eof  shut down when standard input reaches EOF, so the server
//                        dies together with the parent process holding the pipe
//
// Once listening, prints exactly one line "READY mongodb://127.0.0.1:PORT" on
// stdout (flushed). Runs until killed (SIGTERM/SIGINT shut down cleanly).

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.ServerVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.CountDownLatch;

public final class MongoTestServer {

    public static void main(String[] args) throws Exception {
        int port = 0;
        int wireVersion = 0;
        boolean exitOnStdinEof = false;
        for (String arg : args) {
            if (arg.equals("--exit-on-stdin-eof")) {
                exitOnStdinEof = true;
            } else if (arg.startsWith("--wire-version=")) {
                try {
                    wireVersion = Integer.parseInt(arg.substring("--wire-version=".length()));
                } catch (NumberFormatException e) {
                    System.err.println("MongoTestServer: invalid argument: " + arg);
                    System.exit(2);
                    return;
                }
            } else if (arg.equals("-h") || arg.equals("--help")) {
                System.out.println("usage: MongoTestServer [PORT] [--wire-version=N] [--exit-on-stdin-eof]");
                return;
            } else {
                try {
                    port = Integer.parseInt(arg);
                } catch (NumberFormatException e) {
                    System.err.println("MongoTestServer: invalid argument: " + arg);
                    System.exit(2);
                    return;
                }
            }
        }

        MongoBackend backend = new MemoryBackend();
        if (wireVersion > 0) {
            final ServerVersion base = ServerVersion.MONGO_5_0;
            final int wire = wireVersion;
            backend.version(new MongoVersion() {
                @Override
                public List<Integer> getVersionArray() {
                    return base.getVersionArray();
                }

                @Override
                public int getWireVersion() {
                    return wire;
                }
            });
        }
        final MongoServer server = new MongoServer(backend);
        final CountDownLatch stopped = new CountDownLatch(1);
        try {
            server.bind("127.0.0.1", port);
        } catch (RuntimeException e) {
            System.err.println("MongoTestServer: cannot bind 127.0.0.1:" + port + ": " + e);
            System.exit(1);
            return;
        }
        InetSocketAddress addr = server.getLocalAddress();

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.shutdownNow();
            } catch (RuntimeException ignored) {
                // best effort on the way out
            }
            stopped.countDown();
        }, "mongo-test-server-shutdown"));

        System.out.println("READY mongodb://127.0.0.1:" + addr.getPort());
        System.out.flush();

        if (exitOnStdinEof) {
            Thread watcher = new Thread(() -> {
                InputStream in = System.in;
                byte[] buf = new byte[256];
                try {
                    while (in.read(buf) >= 0) {
                        // discard input; we only care about EOF
                    }
                } catch (IOException ignored) {
                    // treat a broken stdin like EOF
                }
                System.exit(0); // runs the shutdown hook
            }, "mongo-test-server-stdin-watch");
            watcher.setDaemon(true);
            watcher.start();
        }

        stopped.await();
    }
}

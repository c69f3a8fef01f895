// mongo-java-server launcher of the fault suite (../server.py builds and starts it).
//
// Usage: java -cp 'lib/*:classes' FaultServer PORT [--wire-version=N] [--h2-file=PATH]
//                                              [--clock-offset-file=PATH]
//
//   PORT                     TCP port on 127.0.0.1 (0 = a free one)
//   --wire-version=N         advertise maxWireVersion N (as ../../servers/java/MongoTestServer)
//   --h2-file=PATH           H2 MVStore file backend: data (and so fence epochs) survive a
//                            restart; default: the in-memory backend, which loses them
//   --clock-offset-file=PATH the server's clock (hello/isMaster localTime, $currentDate) is
//                            the host clock plus the integer milliseconds written in PATH,
//                            re-read every 10 ms: a clock step on the server at run time
//
// Prints "READY mongodb://127.0.0.1:PORT" once listening. SIGTERM shuts down cleanly
// (the H2 store is committed and closed).

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.ServerVersion;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CountDownLatch;

public final class FaultServer {

    static final class OffsetClock extends Clock {
        volatile long offsetMs;

        @Override
        public ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
            return this;
        }

        @Override
        public Instant instant() {
            return Instant.ofEpochMilli(System.currentTimeMillis() + offsetMs);
        }

        @Override
        public long millis() {
            return System.currentTimeMillis() + offsetMs;
        }
    }

    public static void main(String[] args) throws Exception {
        int port = 0;
        int wireVersion = 0;
        String h2File = null;
        String offsetFile = null;
        for (String arg : args) {
            if (arg.startsWith("--wire-version=")) {
                wireVersion = Integer.parseInt(arg.substring("--wire-version=".length()));
            } else if (arg.startsWith("--h2-file=")) {
                h2File = arg.substring("--h2-file=".length());
            } else if (arg.startsWith("--clock-offset-file=")) {
                offsetFile = arg.substring("--clock-offset-file=".length());
            } else {
                port = Integer.parseInt(arg);
            }
        }
        final OffsetClock clock = new OffsetClock();
        if (offsetFile != null) {
            final String path = offsetFile;
            Thread watcher = new Thread(() -> {
                for (;;) {
                    try {
                        String s = new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8).trim();
                        if (!s.isEmpty()) clock.offsetMs = Long.parseLong(s);
                    } catch (Exception ignored) {
                        // absent or being rewritten: keep the last offset
                    }
                    try {
                        Thread.sleep(10);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "clock-offset-watch");
            watcher.setDaemon(true);
            watcher.start();
        }
        final MongoBackend backend = h2File != null ? new H2Backend(h2File, clock) : new MemoryBackend(clock);
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
        server.bind("127.0.0.1", port);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.shutdownNow();
            } catch (RuntimeException ignored) {
                // best effort
            }
            stopped.countDown();
        }, "fault-server-shutdown"));
        System.out.println("READY mongodb://127.0.0.1:" + server.getLocalAddress().getPort());
        System.out.flush();
        stopped.await();
    }
}

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
// Once listening, warms up (see warmUp) and then prints exactly one line
// "READY mongodb://127.0.0.1:PORT" on stdout (flushed). Runs until killed (SIGTERM/SIGINT
// shut down cleanly).

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.ServerVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.wire.bson.BsonEncoder;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Arrays;
import java.time.Instant;
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

        try {
            warmUp(addr.getPort());
        } catch (IOException | RuntimeException e) {
            // A server that answers slowly at first is still a server: go on.
            System.err.println("MongoTestServer: warm-up failed: " + e);
        }

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

    // The first commands a cold JVM serves take hundreds of milliseconds (class loading,
    // interpretation): enough to fail a test whose calls are bounded at 300 ms when the
    // machine is busy. So before saying READY, run the protocol's commands (claims,
    // renewals, releases, reads, indexes) over a socket for a while, on a scratch database
    // dropped afterwards.
    private static void warmUp(int port) throws IOException {
        final String db = "mongo_test_server_warm_up";
        final long until = System.nanoTime() + 2_000_000_000L;
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(10_000);
            OutputStream out = socket.getOutputStream();
            DataInputStream in = new DataInputStream(socket.getInputStream());
            command(out, in, new Document("hello", 1).append("$db", "admin"));
            command(out, in, new Document("createIndexes", "locks").append("$db", db)
                    .append("indexes", List.of(new Document("key", new Document("ts_expire", 1))
                            .append("name", "ts_expire_1").append("expireAfterSeconds", 0))));
            for (int round = 0; round < 300 && System.nanoTime() < until; round++) {
                String key = "k" + (round % 7);
                Instant now = Instant.now();
                Instant later = now.plusSeconds(30);
                command(out, in, new Document("findAndModify", "locks").append("$db", db)
                        .append("query", new Document("_id", key).append("$or", List.of(
                                new Document("locked", false),
                                new Document("ts_expire", new Document("$lte", now)))))
                        .append("update", new Document("$set", new Document("locked", true)
                                .append("uuid", "u" + round).append("ts_expire", later))
                                .append("$inc", new Document("fence", 1L)))
                        .append("upsert", true).append("new", true));
                command(out, in, new Document("update", "locks").append("$db", db)
                        .append("updates", List.of(new Document("q", new Document("_id",
                                new Document("$in", Arrays.asList(key, "x")))
                                .append("locked", true))
                                .append("u", new Document("$max", new Document("ts_expire", later)))
                                .append("multi", true))));
                command(out, in, new Document("find", "locks").append("$db", db)
                        .append("filter", new Document("_id", key)).append("limit", 1));
                command(out, in, new Document("update", "locks").append("$db", db)
                        .append("updates", List.of(new Document("q", new Document("_id", key))
                                .append("u", new Document("$set", new Document("locked", false)
                                        .append("ts_expire", now))))));
                command(out, in, new Document("findAndModify", "locks.fences").append("$db", db)
                        .append("query", new Document("_id", key))
                        .append("update", new Document("$inc", new Document("epoch", 1L)))
                        .append("upsert", true).append("new", true));
                command(out, in, new Document("delete", "locks").append("$db", db)
                        .append("deletes", List.of(new Document("q", new Document("_id", key)
                                .append("uuid", "u" + round)).append("limit", 1))));
                command(out, in, new Document("insert", "status").append("$db", db)
                        .append("documents", List.of(new Document("_id", "s" + round)
                                .append("key", key).append("timestamp", now))));
            }
            command(out, in, new Document("dropDatabase", 1).append("$db", db));
        }
    }

    private static int requestId = 0;

    // One OP_MSG round trip (body section only); the reply is read and dropped.
    private static void command(OutputStream out, DataInputStream in, Document body)
            throws IOException {
        ByteBuf buf = Unpooled.buffer();
        try {
            buf.writeIntLE(0); // messageLength, set below
            buf.writeIntLE(++requestId);
            buf.writeIntLE(0); // responseTo
            buf.writeIntLE(2013); // OP_MSG
            buf.writeIntLE(0); // flagBits
            buf.writeByte(0); // section kind 0: the body
            BsonEncoder.encodeDocument(body, buf);
            buf.setIntLE(0, buf.readableBytes());
            byte[] bytes = new byte[buf.readableBytes()];
            buf.readBytes(bytes);
            out.write(bytes);
            out.flush();
        } finally {
            buf.release();
        }
        byte[] header = new byte[4];
        in.readFully(header);
        int length = (header[0] & 0xff) | (header[1] & 0xff) << 8 | (header[2] & 0xff) << 16
                | (header[3] & 0xff) << 24;
        if (length < 16 || length > 48_000_000) throw new IOException("bad reply length " + length);
        in.readFully(new byte[length - 4]);
    }
}

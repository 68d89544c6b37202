// A load generator on ZooKeeper's own Java client: the same client against Apache ZooKeeper and
// zabray. Compiled at run time by benchmarks/zkload.py (javac against Debian's zookeeper.jar).
//
// Usage: ZkLoad HOSTS OP VALUE_BYTES OUTSTANDING SECONDS [WARMUP_SECONDS]
//   OP: setData | create | getData
// Keeps OUTSTANDING async requests in flight on one session for SECONDS and prints one JSON line:
// {"op":..., "ops":N, "seconds":S, "ops_per_s":R, "p50_ms":..., "p99_ms":..., "errors":E}
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.zookeeper.AsyncCallback;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public final class ZkLoad {
    private static final int MAX_SAMPLES = 2_000_000;

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: ZkLoad HOSTS OP VALUE_BYTES OUTSTANDING SECONDS [WARMUP_SECONDS]");
            System.exit(2);
        }
        String hosts = args[0];
        String op = args[1];
        int size = Integer.parseInt(args[2]);
        int outstanding = Integer.parseInt(args[3]);
        double seconds = Double.parseDouble(args[4]);
        double warmup = args.length > 5 ? Double.parseDouble(args[5]) : 1.0;
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(hosts, 30000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
        });
        if (!connected.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("not connected to " + hosts);
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'x');
        String root = "/zkload-" + Long.toHexString(zk.getSessionId());
        zk.create(root, value, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        int keys = Math.max(1, Math.min(outstanding, 1000));
        for (int i = 0; i < keys; i++) {
            zk.create(root + "/k" + i, value, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        }
        Semaphore window = new Semaphore(outstanding);
        AtomicLong errors = new AtomicLong();
        long[] samples = new long[MAX_SAMPLES];
        AtomicLong done = new AtomicLong();
        long start = System.nanoTime();
        long warmEnd = start + (long) (warmup * 1e9);
        long end = warmEnd + (long) (seconds * 1e9);
        long issued = 0;
        while (true) {
            window.acquire();
            long now = System.nanoTime();
            if (now >= end) { window.release(); break; }
            final long t0 = now;
            final boolean measured = t0 >= warmEnd;
            String path = root + "/k" + (issued % keys);
            issued++;
            switch (op) {
                case "setData":
                    zk.setData(path, value, -1, (AsyncCallback.StatCallback) (rc, p, ctx, stat) ->
                        finish(rc, t0, measured, end, window, errors, samples, done), null);
                    break;
                case "getData":
                    zk.getData(path, false, (AsyncCallback.DataCallback) (rc, p, ctx, data, stat) ->
                        finish(rc, t0, measured, end, window, errors, samples, done), null);
                    break;
                case "create":
                    zk.create(path + "-", value, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL,
                        (AsyncCallback.StringCallback) (rc, p, ctx, name) ->
                            finish(rc, t0, measured, end, window, errors, samples, done), null);
                    break;
                default:
                    throw new IllegalArgumentException("unknown op " + op + " (setData, create, getData)");
            }
        }
        if (!window.tryAcquire(outstanding, 120, TimeUnit.SECONDS)) throw new IllegalStateException("replies missing");
        double elapsed = (end - warmEnd) / 1e9;
        int n = (int) Math.min(done.get(), MAX_SAMPLES);
        long[] lat = Arrays.copyOf(samples, n);
        Arrays.sort(lat);
        double p50 = n > 0 ? lat[n / 2] / 1e6 : -1;
        double p99 = n > 0 ? lat[Math.min(n - 1, (int) (n * 0.99))] / 1e6 : -1;
        System.out.printf("{\"op\":\"%s\",\"ops\":%d,\"seconds\":%.3f,\"ops_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"errors\":%d}%n",
            op, done.get(), elapsed, done.get() / elapsed, p50, p99, errors.get());
        zk.close();
    }

    // Counts a reply toward the figures only when its request started in the measured window and it
    // arrived before the window closed, so the drain after the window adds nothing.
    private static void finish(int rc, long t0, boolean measured, long end, Semaphore window, AtomicLong errors,
                               long[] samples, AtomicLong done) {
        long t1 = System.nanoTime();
        if (rc != 0) errors.incrementAndGet();
        if (measured && rc == 0 && t1 <= end) {
            long i = done.getAndIncrement();
            if (i < MAX_SAMPLES) samples[(int) i] = t1 - t0;
        }
        window.release();
    }
}

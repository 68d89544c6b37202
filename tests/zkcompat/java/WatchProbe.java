// ZooKeeper's Java client holding one persistent recursive watch on /pw, for
// tests/zkcompat/test_java_watches.py: prints "READY <port of its server>", then one line per
// event ("EVENT <type> <path>", "STATE <state>"), and exits when its stdin closes.
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public final class WatchProbe {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 10000, e -> {
            say("STATE " + e.getState());
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
        });
        if (!connected.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("not connected");
        try {
            zk.create("/pw", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // a second run on the same ensemble
        }
        zk.addWatch("/pw", e -> say("EVENT " + e.getType() + " " + e.getPath()), AddWatchMode.PERSISTENT_RECURSIVE);
        Matcher m = Pattern.compile("remoteserver:\\S*?:(\\d+)").matcher(zk.toString());
        say("READY " + (m.find() ? m.group(1) : "?"));
        while (System.in.read() != -1) {
            // until the test closes our stdin
        }
        zk.close();
    }
}

// ZooKeeper's Java client with canBeReadOnly on a server cut off from its quorum, for the
// read-only scenario of tests/zkcompat/differential.py: prints the session's states ("STATE
// <state>"), a read ("GOT <data>" or "GET <error code>") and each write's outcome ("<OP> <code>").
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public final class ReadOnlyProbe {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    interface Call {
        void run() throws Exception;
    }

    static void attempt(String what, Call call) throws InterruptedException {
        try {
            call.run();
            say(what + " OK");
        } catch (KeeperException e) {
            say(what + " " + e.code());
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            say(what + " " + e.getClass().getSimpleName());
        }
    }

    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 10000, e -> {
            say("STATE " + e.getState());
            if (e.getState() == Watcher.Event.KeeperState.ConnectedReadOnly
                    || e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        }, true);
        if (!connected.await(60, TimeUnit.SECONDS)) {
            say("TIMEOUT");
        }
        try {
            say("GOT " + new String(zk.getData("/ro", false, null), "UTF-8"));
        } catch (KeeperException e) {
            say("GET " + e.code());
        }
        attempt("CREATE", () -> zk.create("/ro/java", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        attempt("SET", () -> zk.setData("/ro", new byte[0], -1));
        attempt("DELETE", () -> zk.delete("/ro/c", -1));
        zk.close();
    }
}

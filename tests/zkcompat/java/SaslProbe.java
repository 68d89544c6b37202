// ZooKeeper's Java client authenticating with SASL DIGEST-MD5 from its JAAS "Client" section
// (-Djava.security.auth.login.config), for tests/zkcompat/test_sasl.py. Prints one line per
// session state ("STATE <state>"), then what it could do as that user: create a znode only its
// SASL user may touch, read it back, and who the server says it is; "ERROR <code>" for a refusal.
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;

public final class SaslProbe {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        CountDownLatch settled = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 10000, e -> {
            say("STATE " + e.getState());
            Watcher.Event.KeeperState s = e.getState();
            if (s == Watcher.Event.KeeperState.SaslAuthenticated || s == Watcher.Event.KeeperState.AuthFailed) {
                settled.countDown();
            }
        });
        if (!settled.await(60, TimeUnit.SECONDS)) {
            say("TIMEOUT");
        }
        String path = args[1];
        try {
            List<ACL> acl = new ArrayList<>();  // (not List.of: the client's validateACL asks contains(null))
            acl.add(new ACL(ZooDefs.Perms.ALL, new Id("sasl", "jaasuser")));
            zk.create(path, "from-java".getBytes("UTF-8"), acl, CreateMode.PERSISTENT);
            say("CREATED " + path);
            say("GOT " + new String(zk.getData(path, false, null), "UTF-8"));
            StringBuilder ids = new StringBuilder();
            for (ClientInfo c : zk.whoAmI()) {
                ids.append(' ').append(c.getAuthScheme()).append(':').append(c.getUser());
            }
            say("WHOAMI" + ids);
        } catch (KeeperException e) {
            say("ERROR " + e.code());
        }
        zk.close();
    }
}

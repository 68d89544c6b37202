"""The four-letter words' texts, pure: ZooKeeper 3.8's layouts for every word zabray answers
(the side-by-side check against a running ZooKeeper is tests/zkcompat/test_four_letter_oracle.py)."""

from __future__ import annotations

import dataclasses

from zabray.wire import four_letter as fl

VIEW = fl.AdminView(
    mode="leader", zxid=0x100000003, znodes=7, watches=3, connections=2, outstanding=0, received=9, sent=9,
    latency=(6, 16.4, 29), sessions={0x10: ["/e"], 0x20: []}, session_timeouts={0x10: 10000, 0x20: 4000},
    clients=[fl.ConnInfo("/127.0.0.1:5000", 1, 0, 5, 6, 0x10, "CREA", 1795839556683, 10000, 4, 0x100000003, 842074,
                         (21, 0, 16, 29)), fl.ConnInfo("/127.0.0.1:5001", 0, 0, 1, 0)],
    data_watches={0x10: ["/w", "/a"], 0x20: ["/w"]}, proposal_sizes=(86, 48, 87), peer_state="leading - broadcast",
    quorum_size=3, learners=2, synced_followers=2,
    environment=[("zookeeper.version", fl.VERSION), ("host.name", "h")],
    config=[("clientPort", "2181"), ("membership: ", None), ("server.1", "h:1:1:participant"), ("version", "0")],
    dirs=(10, 10))
ALL = fl.ALL_WORDS


def test_srvr_and_stat_have_zookeepers_lines() -> None:
    assert fl.answer("srvr", ALL, VIEW) == (
        f"Zookeeper version: {fl.VERSION}\nLatency min/avg/max: 6/16.4/29\nReceived: 9\nSent: 9\nConnections: 2\n"
        "Outstanding: 0\nZxid: 0x100000003\nMode: leader\nNode count: 7\nProposal sizes last/min/max: 86/48/87\n")
    stat = fl.answer("stat", ALL, VIEW).splitlines()
    assert stat[1:5] == ["Clients:", " /127.0.0.1:5000[1](queued=0,recved=5,sent=6)",
                         " /127.0.0.1:5001[0](queued=0,recved=1,sent=0)", ""]
    follower = dataclasses.replace(VIEW, mode="follower", proposal_sizes=None, latency=(0, 1 / 3, 1))
    assert "Proposal" not in fl.answer("srvr", ALL, follower)
    assert "Latency min/avg/max: 0/0.3333/1\n" in fl.answer("srvr", ALL, follower)  # 4 places, as Java's counter


def test_cons_shows_a_sessions_statistics() -> None:
    assert fl.answer("cons", ALL, VIEW) == (
        " /127.0.0.1:5000[1](queued=0,recved=5,sent=6,sid=0x10,lop=CREA,est=1795839556683,to=10000,lcxid=0x4,"
        "lzxid=0x100000003,lresp=842074,llat=21,minlat=0,avglat=16,maxlat=29)\n"
        " /127.0.0.1:5001[0](queued=0,recved=1,sent=0)\n\n")


def test_watch_words_show_data_watches_only() -> None:
    assert fl.answer("wchs", ALL, VIEW) == "2 connections watching 2 paths\nTotal watches:3\n"
    assert fl.answer("wchc", ALL, VIEW) == "0x10\n\t/a\n\t/w\n0x20\n\t/w\n\n"
    assert fl.answer("wchp", ALL, VIEW) == "/a\n\t0x10\n/w\n\t0x10\n\t0x20\n\n"
    empty = dataclasses.replace(VIEW, data_watches={})
    assert fl.answer("wchc", ALL, empty) == fl.answer("wchp", ALL, empty) == "\n"


def test_dump_lists_sessions_by_expiry_on_the_leader_and_with_timeouts_elsewhere() -> None:
    follower = fl.answer("dump", ALL, dataclasses.replace(VIEW, mode="follower"))
    assert follower == ("SessionTracker dump:\nGlobal Sessions(2):\n0x10\t10000ms\n0x20\t4000ms\n"
                        "ephemeral nodes dump:\nSessions with Ephemerals (1):\n0x10:\n\t/e\nConnections dump:\n")
    leader = fl.answer("dump", ALL, dataclasses.replace(VIEW, expiry={0x10: 5_000, 0x20: 5_500}, tick_ms=2000))
    lines = leader.splitlines()
    assert lines[1] == "Session Sets (1)/(2):"  # both round up to the same tick
    assert lines[2].startswith("2 expire at ") and lines[3:5] == ["\t0x10", "\t0x20"]


def test_envi_conf_and_the_rest() -> None:
    assert fl.answer("envi", ALL, VIEW) == f"Environment:\nzookeeper.version={fl.VERSION}\nhost.name=h\n"
    assert fl.answer("conf", ALL, VIEW) == "clientPort=2181\nmembership: \nserver.1=h:1:1:participant\nversion=0"
    assert fl.answer("dirs", ALL, VIEW) == "datadir_size: 10\nlogdir_size: 10\n"
    assert fl.answer("srst", ALL, VIEW) == "Server stats reset.\n"
    assert fl.answer("crst", ALL, VIEW) == "Connection stats reset.\n"
    mntr = dict(line.split("\t") for line in fl.answer("mntr", ALL, VIEW).splitlines())
    assert list(mntr)[:3] == ["zk_version", "zk_server_state", "zk_peer_state"]
    assert mntr["zk_synced_followers"] == "2" and mntr["zk_max_proposal_size"] == "87"
    assert mntr["zk_ephemerals_count"] == "1" and mntr["zk_avg_latency"] == "16.4"


def test_read_only_and_not_serving() -> None:
    ro = dataclasses.replace(VIEW, mode="read-only", proposal_sizes=None)
    assert fl.answer("isro", ALL, ro) == "ro"
    assert fl.answer("srvr", ALL, ro).splitlines()[:2] == [f"Zookeeper version: {fl.VERSION}",
                                                           "READ-ONLY mode; serving only read-only clients"]
    assert "Mode: read-only\n" in fl.answer("srvr", ALL, ro)
    down = dataclasses.replace(VIEW, mode="not serving")
    assert fl.answer("isro", ALL, down) == "null"
    assert fl.answer("ruok", ALL, down) == "imok"
    for w in ("srvr", "stat", "mntr", "conf", "cons", "wchs", "wchc", "wchp", "dump", "dirs"):
        assert fl.answer(w, ALL, down) == fl.NOT_SERVING + "\n", w
    assert fl.answer("envi", ALL, down).startswith("Environment:\nzookeeper.version=")


def test_the_allow_list() -> None:
    allowed = fl.allowed_words("ruok", read_only=False)
    assert fl.answer("stat", allowed, VIEW) == "stat is not executed because it is not in the whitelist.\n"
    assert "Mode: leader" in fl.answer("srvr", allowed, VIEW)  # srvr is always on, as in ZooKeeper
    assert "isro" not in allowed and "isro" in fl.allowed_words("ruok", read_only=True)
    assert fl.allowed_words("*", read_only=False) == fl.ALL_WORDS

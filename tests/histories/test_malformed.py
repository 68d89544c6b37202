"""Bad input is refused, never dropped, clamped or guessed: each malformed history below is a
HistoryInputError whose message starts with FILE:LINE and names the field (exit 2 from the CLI:
tests/pipeline/test_histories_cases_spark.py). The files are written by hand here."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.histories.handwritten import write_run
from zabray.client.histories import HistoryRecorder
from zabray.pipeline.errors import TraceError
from zabray.pipeline.history_io import history_files, read_local
from zabray.pipeline.history_local import check_rows
from zabray.pipeline.history_rows import HistoryInputError

pytestmark = pytest.mark.timeout(60)

GOOD = '{"v":2,"client":"c","session":"s","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}\n'

# (name, the second line of the file, what the message must hold). Reasoning per line:
MALFORMED = [
    # "setData" is ZooKeeper's name, not a kind of the schema: once dropped, so a read of its
    # value was blamed on the wrong cause.
    ("unknown-kind", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"setData","value":"a",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'kind': 'setData' is not one of"),
    ("increment", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"increment",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'kind': 'increment'"),
    # A completion before the invocation was clamped, which hid a stale read.
    ("complete-before-invoke", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"read","result":"x",'
     '"invoke_t":5,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'complete_t': 3 is before invoke_t 5"),
    # No schema version: which rules apply is unknown.
    ("missing-v", '{"client":"c","session":"s","op":1,"key":"/k","kind":"read","result":"x",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'v': missing"),
    ("future-v", '{"v":3,"client":"c","session":"s","op":1,"key":"/k","kind":"read","result":"x",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'v': 3 is not a schema version"),
    # "maybe" is not an outcome; it was treated as definite.
    ("outcome-maybe", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"write","value":"a",'
     '"invoke_t":2,"complete_t":3,"outcome":"maybe"}', "c.jsonl:2: field 'outcome': 'maybe' is not one of"),
    # An ok row without a completion was pending for ever.
    ("ok-without-complete", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"write","value":"a",'
     '"invoke_t":2,"outcome":"ok"}', "c.jsonl:2: field 'complete_t': missing on an 'ok' row"),
    # A line cut short (a crash mid-write), and a line that was never JSON.
    ("truncated", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"wri', "c.jsonl:2: not JSON"),
    ("not-json", 'hello', "c.jsonl:2: not JSON"),
    ("not-an-object", '[1, 2]', "c.jsonl:2: not a JSON object"),
    # A misspelt field is not silently null.
    ("unknown-field", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"write","value":"a",'
     '"invoke_t":2,"complete_time":3,"outcome":"ok"}', "c.jsonl:2: field 'complete_time': not in schema version 2"),
    ("v1-has-no-multi", '{"v":1,"client":"c","session":"s","op":1,"key":"/k","kind":"write","value":"a",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok","multi":1}', "c.jsonl:2: field 'multi': not in schema version 1"),
    ("check-outside-multi", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"check","version":0,'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'kind': 'check' is only a sub-operation"),
    ("cas-without-version", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"cas","value":"a",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'version': missing on a cas"),
    ("op-not-integer", '{"v":2,"client":"c","session":"s","op":"1","key":"/k","kind":"read",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'op': '1' is not an integer"),
    ("time-not-number", '{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"read",'
     '"invoke_t":"soon","complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'invoke_t': 'soon' is not a finite number"),
    ("missing-key", '{"v":2,"client":"c","session":"s","op":1,"kind":"read",'
     '"invoke_t":2,"complete_t":3,"outcome":"ok"}', "c.jsonl:2: field 'key': missing"),
    # The same row twice (a file concatenated with itself): once reported as a violation.
    ("duplicated-row", GOOD.strip(), "c.jsonl:2: the same operation as"),
]


@pytest.mark.parametrize("name,line,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_line_is_refused_naming_file_line_and_field(name: str, line: str, message: str,
                                                             tmp_path: Path) -> None:
    run = write_run(tmp_path, GOOD + line + "\n")
    with pytest.raises(HistoryInputError) as e:
        check_rows(read_local(run))
    text = str(e.value)
    assert text.startswith(str(run / "histories" / "c.jsonl") + ":"), text
    assert message in text, text
    assert "\n" not in text  # one line


def test_duplicated_row_names_both_places(tmp_path: Path) -> None:
    run = write_run(tmp_path, GOOD + GOOD)
    with pytest.raises(HistoryInputError, match=r"c.jsonl:2: the same operation as .*c.jsonl:1"):
        check_rows(read_local(run))


def test_multi_rows_that_disagree(tmp_path: Path) -> None:
    # The two rows of multi 1 disagree on their outcome: a multi commits or fails as a whole.
    run = write_run(tmp_path, GOOD + """\
{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"write","value":"a","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","multi":1}
{"v":2,"client":"c","session":"s","op":2,"key":"/j","kind":"write","value":"b","version":-1,"invoke_t":2,"complete_t":3,"outcome":"fail","error":"BAD_VERSION","multi":1}
""")
    with pytest.raises(HistoryInputError, match=r"c.jsonl:3: field 'outcome': differs from .*c.jsonl:2"):
        check_rows(read_local(run))


def test_empty_history_checked_nothing(tmp_path: Path) -> None:
    run = write_run(tmp_path, "")
    with pytest.raises(HistoryInputError, match="checked nothing"):
        check_rows(read_local(run))


def test_several_problems_are_all_counted(tmp_path: Path) -> None:
    run = write_run(tmp_path, GOOD + "nope\n" + GOOD.replace('"op":0', '"op":7').replace('"ok"', '"maybe"'))
    with pytest.raises(HistoryInputError) as e:
        read_local(run)
    assert "c.jsonl:2: not JSON" in str(e.value) and "and 1 more problem" in str(e.value) \
        and "c.jsonl:3: field 'outcome'" in str(e.value)


def test_blank_lines_hold_no_row_and_line_numbers_stay_true(tmp_path: Path) -> None:
    run = write_run(tmp_path, "\n" + GOOD + "\n   \n" + GOOD.replace('"op":0', '"op":1'))
    rows = read_local(run)
    assert [r["line"] for r in rows] == [2, 5]


def test_hidden_file_names_are_read(tmp_path: Path) -> None:
    """``HistoryRecorder.for_run`` accepts client names starting with '_' or '.'; Spark's
    readers would skip such files: every file is read, and counted."""
    run = tmp_path / "run"
    for client in ("_under", ".dot", "plain"):
        with HistoryRecorder.for_run(run, client) as rec:
            p = rec.invoke("s", f"/{client}", "create", value="x")
            rec.complete(p, "ok", result_version=0, zxid=1)
    names = sorted(p.name for p in history_files(run))
    assert names == [".dot.jsonl", "_under.jsonl", "plain.jsonl"]
    assert sorted(r["key"] for r in read_local(run)) == ["/.dot", "/_under", "/plain"]


def test_other_files_in_histories_are_refused(tmp_path: Path) -> None:
    run = write_run(tmp_path, GOOD)
    (run / "histories" / "notes.txt").write_text("a note")
    with pytest.raises(TraceError, match=r"notes.txt: not a history file"):
        history_files(run)


def test_gzip_and_truncated_gzip(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "histories").mkdir(parents=True)
    data = gzip.compress((GOOD + GOOD.replace('"op":0', '"op":1')).encode())
    (run / "histories" / "c.jsonl.gz").write_bytes(data)
    assert [r["line"] for r in read_local(run)] == [1, 2]
    (run / "histories" / "c.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(HistoryInputError, match="c.jsonl.gz: cannot be read to its end"):
        read_local(run)


def test_recorder_appending_keeps_ops_unique(tmp_path: Path) -> None:
    """A second recorder on the same file continues the op numbers (a run recorded twice into
    one directory stays readable: no duplicated rows)."""
    for _ in range(2):
        with HistoryRecorder.for_run(tmp_path, "c") as rec:
            for i in range(3):
                p = rec.invoke("s", "/k", "write", value=f"v{i}")
                rec.complete(p, "ok")
    ops = [r["op"] for r in read_local(tmp_path)]
    assert ops == list(range(6))


def test_large_file_split_into_ranges_keeps_every_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file read in several byte ranges (one task each on Spark) gives every line once, with
    its true line number, whatever the range boundaries cut."""
    from zabray.pipeline import history_io

    lines = [GOOD.replace('"op":0', f'"op":{i}').replace('"value":"x"', f'"value":"{"x" * (i % 7)}"')
             for i in range(50)]
    run = write_run(tmp_path, "".join(lines))
    monkeypatch.setattr(history_io, "CHUNK", 97)
    tasks = history_io.tasks("run", history_files(run))
    assert len(tasks) > 10
    rows = [r for t in tasks for r in history_io.read_task(t)]
    assert [r["line"] for r in rows] == list(range(1, 51)) and [r["op"] for r in rows] == list(range(50))

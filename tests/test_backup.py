"""Nothing lost on a free Space (issue #18): backup then restore into an empty data dir gives the same papers,
thoughts, turns and votes; the Hub down, slow or refusing the token leaves the app serving with the error shown;
restore never overwrites data; a snapshot with an unsafe entry is refused. The Hub is a double at the library's
boundary (tests/doubles.FakeHub); the real client against huggingface.co is the README's manual check."""

from __future__ import annotations

import io
import tarfile

import pytest

from copilot.errors import UserError
from copilot.features import backup as B
from copilot.features.chat import Chat
from copilot.features.library import backup_line
from copilot.services import Services
from copilot.store.backup import BackupError, extract_snapshot
from tests.conftest import import_papers, make_settings
from tests.doubles import FakeHub, ScriptedBackend, rescript

REPO = "someone/copilot-backup"
TOKEN = "hf_secret_token_1234567890"


def settings_for(data_dir, **overrides):
    return make_settings(data_dir, hub_backup=REPO, hub_token=TOKEN, **overrides)


def counts(services: Services) -> dict:
    db = services.db
    return {"papers": services.store.count("paper"), "thought_vectors": services.store.count("thought"),
            "thoughts": db.query_one("SELECT COUNT(*) AS n FROM thoughts")["n"],
            "turns": db.query_one("SELECT COUNT(*) AS n FROM chat_turns")["n"],
            "votes": db.query_one("SELECT COUNT(*) AS n FROM chat_votes")["n"],
            "profiles": db.query_one("SELECT COUNT(*) AS n FROM profiles")["n"]}


def test_backup_then_restore_into_an_empty_data_dir_gives_the_same_records(tmp_path):
    hub = FakeHub(tmp_path / "hub")
    services = Services(settings_for(tmp_path / "live"), llm_backend=ScriptedBackend())
    import_papers(services, 30)
    rescript(services, ["Retrieval grounds answers in papers [1]."] * 40)
    chat = Chat(services)
    question = "How does retrieval help question answering?"
    seed = services.store.search("paper", services.embedder.embed_one(question), 1)[0]
    chat.memory.add(question, [(seed.id, "paper")], origin="test", check_redundant=False)   # makes comparisons
    for _ in range(3):
        chat.ask(question, "ann", vote="thoughts")
    chat.wait_for_all(timeout=120)
    services.profiles.save("ann", "I study retrieval.", ["retrieval"], [])
    before = counts(services)
    assert before["turns"] == 3 and before["votes"] >= 1 and before["thoughts"] >= 1

    (services.settings.data_dir / "models").mkdir(exist_ok=True)
    (services.settings.data_dir / "models" / "big.gguf").write_bytes(b"GGUF" + b"\0" * 1000)

    result = B.backup_now(services, api=hub)
    assert result["status"] == "ok" and result["snapshot"].endswith(".tar.gz")
    assert hub.list_repo_files(REPO) == ["LATEST", f"snapshots/{result['snapshot']}"]
    # issue #41: what leaves the machine is the app database and the collections' rows; no index binary, no model
    with tarfile.open(tmp_path / "hub" / REPO.replace("/", "--") / "snapshots" / result["snapshot"]) as tar:
        assert sorted(tar.getnames()) == ["copilot.db", "vectors.sqlite3"]

    fresh = settings_for(tmp_path / "fresh")
    restored = B.restore_at_start(fresh, api=hub)
    assert restored["status"] == "ok" and restored["snapshot"] == f"snapshots/{result['snapshot']}"
    assert restored["rebuilt"] == {"papers": before["papers"], "thoughts": before["thought_vectors"]}
    assert not (tmp_path / "fresh" / "vectors.sqlite3").exists()
    again = Services(fresh)
    assert counts(again) == before
    assert again.store.search("paper", again.embedder.embed_one("retrieval"), 3)     # the vectors answer queries
    assert "restored at start" in backup_line(again)
    assert B.restore_at_start(fresh, api=hub) is None               # not empty any more: nothing is overwritten
    with pytest.raises(UserError, match="already holds data"):
        B.restore(fresh, api=hub)


def test_old_snapshots_are_pruned_in_the_same_commit(tmp_path):
    hub = FakeHub(tmp_path / "hub")
    services = Services(settings_for(tmp_path / "live"))
    import_papers(services, 5)
    names = []
    for _ in range(4):
        names.append(B.backup_now(services, api=hub)["snapshot"])
        import time
        time.sleep(1.1)                                            # names are per second
    files = hub.list_repo_files(REPO)
    assert files == ["LATEST"] + [f"snapshots/{n}" for n in names[-3:]]
    assert "snapshots/" + names[0] in hub.commits[-1]["paths"]      # deleted by the last commit


@pytest.mark.parametrize("hub_kwargs, message", [
    ({"fail_with": ConnectionError(f"cannot reach the Hub (token {TOKEN})")}, "ConnectionError"),
    ({"fail_with": PermissionError("401 Unauthorized: invalid token")}, "401"),
    ({"delay": 3.0}, "did not finish within 1 s"),
])
def test_the_hub_down_slow_or_refusing_is_recorded_and_shown_and_nothing_breaks(tmp_path, hub_kwargs, message):
    services = Services(settings_for(tmp_path / "live", hub_timeout=1.0))
    import_papers(services, 3)
    result = B.backup_now(services, api=FakeHub(tmp_path / "hub", **hub_kwargs))
    assert result["status"] == "failed" and message in result["error"] and TOKEN not in result["error"]
    line = backup_line(services)
    assert "no snapshot yet" in line and "failed" in line and TOKEN not in line
    assert services.store.count("paper") == 3                       # the app's data is untouched
    restored = B.restore(settings_for(tmp_path / "empty", hub_timeout=1.0),
                         api=FakeHub(tmp_path / "hub", **hub_kwargs))
    assert restored["status"] == "failed" and TOKEN not in restored["error"]


def test_not_configured_and_unsafe_snapshots_are_refused(tmp_path):
    with pytest.raises(UserError, match="COPILOT_HUB_BACKUP"):
        B.backup_now(Services(make_settings(tmp_path / "plain")))
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BackupError, match="not allowed"):
        extract_snapshot(archive, tmp_path / "target")
    assert not (tmp_path / "outside.txt").exists()


def test_a_failed_restore_at_start_pauses_scheduled_backups(tmp_path, monkeypatch):
    """The Hub down at start: the app starts empty; its scheduled backups must not make that empty state the
    newest snapshot of a repository that holds the real one."""
    hub = FakeHub(tmp_path / "hub")
    live = Services(settings_for(tmp_path / "live"))
    import_papers(live, 3)
    good = B.backup_now(live, api=hub)["snapshot"]
    monkeypatch.setattr(B, "_scheduled_paused", [])
    fresh = settings_for(tmp_path / "fresh")
    down = FakeHub(tmp_path / "hub", fail_with=ConnectionError("Hub unreachable"))
    assert B.restore_at_start(fresh, api=down)["status"] == "failed"
    started_empty = Services(fresh)
    monkeypatch.setattr(B, "hub_api", lambda settings: hub)
    B.scheduled_backup(started_empty)
    assert hub.list_repo_files(REPO) == ["LATEST", f"snapshots/{good}"]         # untouched
    assert (tmp_path / "hub" / REPO.replace("/", "--") / "LATEST").read_text() == f"snapshots/{good}"
    assert "scheduled backups are paused" in backup_line(started_empty)


def test_a_configured_push_reaches_the_hub_although_the_app_defaults_to_offline(tmp_path, monkeypatch):
    """load_settings sets HF_HUB_OFFLINE=1 for everything else; with it, huggingface_hub refused every backup and
    preference push before sending anything (OfflineModeIsEnabled). A refused loopback port shows the request left."""
    from huggingface_hub import constants

    from copilot.features.backup import _within_deadline, hub_api

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)        # as huggingface_hub read it at import
    settings = make_settings(tmp_path / "data", hub_endpoint="http://127.0.0.1:9", hub_timeout=20)
    api = hub_api(settings)
    with pytest.raises(Exception) as raised:
        _within_deadline(settings, lambda: api.create_repo("someone/backup", repo_type="dataset", exist_ok=True))
    assert "offline mode" not in str(raised.value).lower() and type(raised.value).__name__ != "OfflineModeIsEnabled"
    assert constants.HF_HUB_OFFLINE is True                        # lifted for the push alone


def test_a_restore_that_failed_halfway_is_tried_again_at_the_next_start(tmp_path):
    """A snapshot whose rows could not be rebuilt left its database unpacked: the data dir was no longer empty, so no
    later start restored again and the app ran on half a library. Now the next start moves that aside and restores."""
    hub = FakeHub(tmp_path / "hub")
    live = Services(settings_for(tmp_path / "live"))
    import_papers(live, 5)
    name = B.backup_now(live, api=hub)["snapshot"]
    served = tmp_path / "hub" / REPO.replace("/", "--") / "snapshots" / name
    good = served.read_bytes()
    with tarfile.open(served) as tar:                    # the same snapshot with its vector rows damaged
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    with tarfile.open(served, "w:gz") as tar:
        for member, data in members.items():
            data = b"\0" * len(data) if member == "vectors.sqlite3" else data
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    fresh = settings_for(tmp_path / "fresh")
    first = B.restore_at_start(fresh, api=hub)
    assert first["status"] == "failed" and (tmp_path / "fresh" / "copilot.db").exists()     # half restored
    assert Services(fresh).db.query_one("SELECT COUNT(*) AS n FROM hub_backups")["n"] >= 1     # the app started on it
    served.write_bytes(good)                             # the Hub serves a whole snapshot again
    again = B.restore_at_start(fresh, api=hub)
    assert again is not None and again["status"] == "ok", again
    assert counts(Services(fresh))["papers"] == 5
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("fresh.before-restore-")]   # moved aside, kept
    assert B.restore_at_start(fresh, api=hub) is None                 # done: nothing is restored over it again


def test_a_restore_past_its_deadline_leaves_no_temporary_directory(tmp_path, monkeypatch):
    """The download went on after the deadline and wrote the snapshot into the temporary directory the restore had
    already removed, so each slow restore left a directory holding a whole snapshot behind."""
    import tempfile
    import threading
    import time

    hub = FakeHub(tmp_path / "hub")
    live = Services(settings_for(tmp_path / "live"))
    import_papers(live, 3)
    assert B.backup_now(live, api=hub)["status"] == "ok"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    slow = FakeHub(tmp_path / "hub", delay=1.0)          # each call: the pointer, then the snapshot
    result = B.restore(settings_for(tmp_path / "fresh", hub_timeout=1.5), api=slow)
    assert result["status"] == "failed" and "did not finish" in result["error"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(t.name.startswith("hub-transfer") for t in threading.enumerate()):
        time.sleep(0.2)                                  # the download finishes late, into the scratch dir
    assert not any(t.name.startswith("hub-transfer") for t in threading.enumerate())
    assert list(scratch.iterdir()) == []

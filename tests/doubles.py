"""Test doubles at the outer boundary only: a scripted LLM backend (a real implementation of the Backend
interface that replies from a queue and records every call)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from copilot.llm import LLM, LLMError, Usage


@dataclass
class RecordedCall:
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float
    grammar: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


@dataclass
class ScriptedBackend:
    """Replies in order. A reply may be a string, an LLMError to raise, or a callable(messages) -> str."""

    replies: list[str | LLMError | Callable[[list[dict[str, str]]], str]] = field(default_factory=list)
    name: str = "scripted"
    model: str = "scripted-model"
    obeys_grammar: bool = False
    calls: list[RecordedCall] = field(default_factory=list)

    def stream(self, messages, max_tokens, temperature, usage: Usage, grammar: str | None = None):
        self.calls.append(RecordedCall(messages, max_tokens, temperature, grammar))
        if not self.replies:
            raise AssertionError(f"scripted LLM ran out of replies at call {len(self.calls)}")
        reply = self.replies.pop(0)
        if isinstance(reply, LLMError):
            raise reply
        text = reply(messages) if callable(reply) else reply
        usage.prompt_tokens = sum(len(m["content"].split()) for m in messages)
        usage.completion_tokens = len(text.split())
        for index, word in enumerate(text.split(" ")):
            yield word if index == 0 else " " + word  # the pieces join back to exactly `text`


def scripted_llm(db, replies: Iterable = ()) -> tuple[LLM, ScriptedBackend]:
    backend = ScriptedBackend(list(replies))
    return LLM(backend, db, retries=0), backend


def rescript(services, replies: Iterable = ()) -> ScriptedBackend:
    """The scripted backend a Services was built with (`Services(settings, llm_backend=ScriptedBackend())`), its
    queue replaced by `replies` and its record of calls cleared: one Services over a module's data, a script per
    test."""
    backend = services.llm.backend
    if not isinstance(backend, ScriptedBackend):
        raise TypeError("this Services was not built with a ScriptedBackend")
    backend.replies[:] = list(replies)
    backend.calls.clear()
    return backend


class FakeHub:
    """The part of `huggingface_hub.HfApi` the backup uses, over a folder: one dataset repository per id. A test
    double at the library's boundary (the real client's HTTP is checked by hand: README "Backups to the Hub").
    `fail_with` makes every call raise it (the Hub down, a wrong token); `delay` makes every call that long."""

    def __init__(self, root, fail_with: Exception | None = None, delay: float = 0.0) -> None:
        from pathlib import Path

        self.root = Path(root)
        self.fail_with = fail_with
        self.delay = delay
        self.commits: list[dict] = []

    def _call(self) -> None:
        import time

        if self.delay:
            time.sleep(self.delay)
        if self.fail_with is not None:
            raise self.fail_with

    def _repo(self, repo_id: str):
        return self.root / repo_id.replace("/", "--")

    def create_repo(self, repo_id, repo_type=None, private=None, exist_ok=False):
        self._call()
        self._repo(repo_id).mkdir(parents=True, exist_ok=True)

    def list_repo_files(self, repo_id, repo_type=None):
        self._call()
        repo = self._repo(repo_id)
        return sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()) if repo.exists() else []

    def create_commit(self, repo_id, operations, commit_message="", repo_type=None):
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        self._call()
        repo = self._repo(repo_id)
        for op in operations:
            target = repo / op.path_in_repo
            if isinstance(op, CommitOperationAdd):
                target.parent.mkdir(parents=True, exist_ok=True)
                source = op.path_or_fileobj
                target.write_bytes(open(source, "rb").read() if isinstance(source, str) else source.getvalue())
            elif isinstance(op, CommitOperationDelete):
                target.unlink()
        self.commits.append({"message": commit_message, "paths": [op.path_in_repo for op in operations]})

    def hf_hub_download(self, repo_id, filename, repo_type=None, local_dir=None):
        import shutil
        from pathlib import Path

        self._call()
        source = self._repo(repo_id) / filename
        if not source.is_file():
            raise FileNotFoundError(f"{filename} not in {repo_id}")
        target = Path(local_dir) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return str(target)

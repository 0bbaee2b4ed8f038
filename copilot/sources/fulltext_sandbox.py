"""Reading a PDF in a child process with limits (issue #58 item 2): `read_pdf` is the one way the product reads a
PDF, whether arXiv sent it or a researcher handed it over (a file path or its bytes).

pypdf's work on a file is not bounded by the file's size: pages that share one content stream decode and parse it
once per page, so a 3 KB PDF whose pages share one 2 MiB stream costs 8 s of CPU per page, and a hostile one hours,
all of it holding the interpreter lock of the process that reads it. So the parse runs in a fresh interpreter
(`python -I`, nothing inherited but the environment) that limits itself first (CPU seconds and address space, the
standard library's `resource`), and the parent gives it a wall-clock deadline after which it is killed. A child that
ends at a limit is this paper's status, "too_costly", with a sentence saying which limit; it never raises and never
touches the parent's memory or interpreter lock. The child writes its Parsed as JSON to stdout; nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import copilot
from copilot.body import Body, Parsed

_ROOT = str(Path(copilot.__file__).resolve().parent.parent)     # where the child finds the `copilot` package


@dataclass(frozen=True)
class Limits:
    """What reading one PDF may cost. A real 36-page LaTeX manual reads in 0.7 s (imports included) in the child,
    0.55 s in process; a 16 KB PDF of 80 pages sharing one 2 MiB content stream would take 400 s."""
    cpu_s: float = 15.0              # CPU seconds in the child (RLIMIT_CPU), imports included
    wall_s: float = 45.0             # seconds until the child is killed, however it spent them (a loaded machine)
    memory_mb: int = 1024            # the child's address space (RLIMIT_AS)


LIMITS = Limits()


def read_pdf(pdf: bytes | Path, paper_id: str, limits: Limits = LIMITS) -> Parsed:
    """`fulltext_pdf.parse_pdf` in a child process within `limits`: a body, or a status saying why there is none
    ("too_costly" when the child reached a limit). `pdf`: the file's bytes or its path. Never raises on a file."""
    from copilot.sources.fulltext_pdf import MAX_PDF_BYTES, parse_pdf

    if isinstance(pdf, Path):
        try:
            with pdf.open("rb") as handle:
                data = handle.read(MAX_PDF_BYTES + 1)
        except OSError as error:
            return Parsed("unreadable", message=f"The PDF {pdf.name[:80]} could not be read ({error.strerror}).")
        pdf = data
    if len(pdf) > MAX_PDF_BYTES or b"%PDF-" not in pdf[:1024]:
        return parse_pdf(pdf, paper_id)             # refused at once, no child needed
    return _in_child(pdf, paper_id, limits)


def read_document(pdf: bytes, name: str, limits: Limits = LIMITS) -> tuple[Parsed, str]:
    """A researcher's own PDF (`fulltext_pdf.parse_document`: passages by page, the title) read in a child process
    within `limits`: (its body or why there is none, its title). `name`: the file's name, for the messages."""
    from copilot.sources.fulltext_pdf import MAX_PDF_BYTES, parse_document

    if len(pdf) > MAX_PDF_BYTES or b"%PDF-" not in pdf[:1024]:
        return parse_document(pdf, name)            # refused at once, no child needed
    wanted = " ".join(name.split())[:60]
    return _run_child(_command(wanted, limits, "document"), pdf, wanted, limits)


def _in_child(data: bytes, paper_id: str, limits: Limits) -> Parsed:
    wanted = paper_id.strip()[:60]
    return _run_child(_command(wanted, limits, "paper"), data, f"the PDF of {wanted}", limits)[0]


def _command(wanted: str, limits: Limits, mode: str) -> list[str]:
    return [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {_ROOT!r}); "
            "from copilot.sources.fulltext_sandbox import child_main; child_main()",
            wanted, repr(limits.cpu_s), str(limits.memory_mb), mode]


def _run_child(command: list[str], data: bytes, what: str, limits: Limits) -> tuple[Parsed, str]:
    said = what[:1].upper() + what[1:]
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=limits.wall_s, check=False)
    except subprocess.TimeoutExpired:              # subprocess.run killed it
        return Parsed("too_costly", message=(f"Reading {what} took longer than {limits.wall_s:g} s; it was stopped "
                                             "and not read.")), ""
    except OSError as error:
        return Parsed("unreadable", message=f"{said} could not be read (no reader process: "
                      f"{type(error).__name__})."), ""
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):     # the soft CPU limit, or the hard one
        return Parsed("too_costly", message=(f"Reading {what} took more than {limits.cpu_s:g} s of CPU (a file "
                                             "built to be slow to read); it was stopped and not read.")), ""
    title = ""
    try:
        parsed, title = _from_json(done.stdout)
    except (ValueError, KeyError, TypeError):
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        parsed = Parsed("unreadable", message=f"{said} could not be read ({last[0][:120]}).")
    if parsed.status == "unreadable" and "MemoryError" in parsed.message:
        return Parsed("too_costly", message=(f"Reading {what} needed more than {limits.memory_mb} MB of memory; it "
                                             "was stopped and not read.")), ""
    return parsed, title


def _to_json(parsed: Parsed, title: str = "") -> bytes:
    body = None if parsed.body is None else parsed.body.to_json()
    return json.dumps({"status": parsed.status, "message": parsed.message, "body": body,
                       "title": title}).encode("utf-8")


def _from_json(raw: bytes) -> tuple[Parsed, str]:
    data = json.loads(raw)
    body = None if data["body"] is None else Body.from_json(data["body"])
    return Parsed(str(data["status"]), body, str(data["message"])), str(data.get("title") or "")


def _limit_self(cpu_s: float, memory_mb: int) -> None:
    import resource

    cpu = max(1, int(cpu_s + 0.999))
    for kind, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)), (resource.RLIMIT_AS, (memory_mb * 2 ** 20,) * 2)):
        try:
            resource.setrlimit(kind, value)
        except (ValueError, OSError):            # a limit already lower stays as it is
            pass


def child_main() -> None:
    """The child: limit itself, read the PDF from stdin, write its Parsed to stdout."""
    paper_id, cpu_s, memory_mb = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "paper"
    _limit_self(cpu_s, memory_mb)
    try:
        os.nice(10)          # background work: the app's requests come first on a shared core
    except OSError:
        pass
    data = sys.stdin.buffer.read()
    from copilot.sources.fulltext_pdf import parse_document, parse_pdf

    out = _to_json(*parse_document(data, paper_id)) if mode == "document" else _to_json(parse_pdf(data, paper_id))
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()

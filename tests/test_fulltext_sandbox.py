"""A PDF is read in a child process with CPU, wall-clock and memory limits (issue #58 item 2): a small file built to
be slow (pages sharing one 2 MiB content stream: pypdf parses it once per page) ends at its limit as "too_costly",
while a paper's PDF reads as it does in process. Integration tier: a child interpreter per reading."""

from __future__ import annotations

import threading
import time
import zlib

from copilot.body import Parsed
from copilot.sources.arxiv_fulltext import FulltextSource
from copilot.sources.fulltext_pdf import parse_pdf
from copilot.sources.fulltext_sandbox import LIMITS, Limits, read_pdf
from tests.conftest import make_settings
from tests.test_fulltext_parse import PAPER_LINES, bomb_pdf, make_pdf


def shared_stream_pdf(pages: int, stream_bytes: int = 2 * 2 ** 20) -> bytes:
    """A PDF of `pages` pages that all draw one content stream of `stream_bytes` of text operators (a few KB
    compressed; in process, 5 s of CPU per page here), written by hand."""
    op = b"(a) Tj\n"
    payload = zlib.compress(b"BT /F1 12 Tf 72 720 Td\n" + op * (stream_bytes // len(op)) + b"ET\n", 9)
    kids = " ".join(f"{5 + n} 0 R" for n in range(pages)).encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(payload) + payload + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
                b"/Resources << /Font << /F1 4 0 R >> >> >>"] * pages
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def timed(call, limit: float) -> tuple[Parsed | None, float]:
    """`call()` on a thread, given `limit` seconds (a reading that is not bounded fails the test, not hangs it)."""
    out: list[Parsed] = []
    start = time.monotonic()
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(limit)
    return (out[0] if out else None), time.monotonic() - start


def test_a_pdf_built_to_be_slow_ends_at_the_cpu_limit():
    hostile = shared_stream_pdf(40)
    assert len(hostile) < 20_000
    limits = Limits(cpu_s=2.0, wall_s=20.0)
    result, seconds = timed(lambda: read_pdf(hostile, "2601.00001", limits), limits.wall_s + 5.0)
    assert result is not None, f"not ended within {limits.wall_s + 5:g} s"
    assert result.status == "too_costly" and "2 s of CPU" in result.message, result


def test_a_pdf_built_to_be_slow_ends_at_the_wall_clock_limit():
    limits = Limits(cpu_s=120.0, wall_s=2.0)
    result, seconds = timed(lambda: read_pdf(shared_stream_pdf(40), "2601.00001", limits), 10.0)
    assert result is not None and result.status == "too_costly" and "longer than 2 s" in result.message, result
    assert seconds < 4.0


def test_a_reader_that_needs_too_much_memory_is_stopped():
    limits = Limits(memory_mb=100)
    assert read_pdf(make_pdf(PAPER_LINES), "2601.00001", limits).status == "ok"
    result = read_pdf(bomb_pdf(60_000_000), "2601.00001", limits)       # inflates to 60 MB, under pypdf's own cap
    assert result.status == "too_costly" and "100 MB" in result.message, result


def test_a_papers_pdf_reads_as_in_process_from_bytes_or_a_path(tmp_path):
    data = make_pdf(PAPER_LINES)
    alone = read_pdf(data, "2401.00001v2")
    assert alone.status == "ok" and alone == parse_pdf(data, "2401.00001v2")
    path = tmp_path / "upload.pdf"
    path.write_bytes(data)
    assert read_pdf(path, "2401.00001v2") == alone
    assert read_pdf(tmp_path / "missing.pdf", "x").status == "unreadable"
    assert read_pdf(b"not a pdf", "x").status == "unreadable"


def test_the_fetch_client_reads_pdfs_in_the_child(tmp_path):
    client = FulltextSource(make_settings(tmp_path / "data"))
    assert client.parse_pdf is read_pdf and LIMITS.cpu_s <= 60 and LIMITS.wall_s <= 120

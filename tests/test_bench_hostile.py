"""`bench --parts hostile` runs and prints its table (numbers are the command's, not asserted here), and its regex
sweep tells a pattern whose time grows with the square of its input from a linear one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from copilot.eval.bench_hostile_regex import find_patterns, sweep_one
from tests.conftest import ROOT


@pytest.mark.unit
def test_the_sweep_flags_a_quadratic_pattern_and_not_a_linear_one():
    # timings on a shared machine jitter: each verdict may take the best of three sweeps
    quadratic = [sweep_one(re.compile(r"\w+y")) for _ in range(3)]   # from every start, the word to its end: n²/2
    linear = [sweep_one(re.compile(r"\w+")) for _ in range(3)]
    assert any(q["flagged"] and 1.6 < q["exponent"] < 2.8 and q["text"].endswith("× n") for q in quadratic)
    assert not all(item["flagged"] for item in linear)


def test_the_sweep_finds_the_products_patterns_with_their_lines():
    found = {item["where"]: item for item in find_patterns()}
    [where] = [w for w in found if w.startswith("copilot/records.py:") and found[w]["name"] == "_WS"]
    line = int(where.rsplit(":", 1)[1])
    assert "_WS = re.compile" in (ROOT / "copilot" / "records.py").read_text().splitlines()[line - 1]
    assert not any(w.startswith(("copilot/eval/", "copilot/cli/")) for w in found)
    assert any(w.startswith("copilot/methods/evidence_text.py:") and found[w]["name"] == "_TEXTBOOK" for w in found)


def test_the_bench_runs_and_prints_its_table(tmp_path):
    cases = "split_long_words,search_long_word,upload_hostile"
    done = subprocess.run([sys.executable, "-m", "copilot", "bench", "--parts", "hostile", "--json",
                           "--hostile-papers", "12", "--hostile-cases", cases, "--call-limit", "120", "--no-sweep"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "COPILOT_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    rows = {row["case"]: row for row in result["rows"]}
    assert list(rows) == ["split_long_words", "search_ordinary", "search_long_word", "upload_ordinary",
                          "upload_hostile"]
    assert all(isinstance(row["seconds"], float) and isinstance(row["stall_ms"], float) for row in rows.values())
    assert rows["upload_hostile"]["note"] == "5 added, 1 refused"        # the 2 MB abstract is over the limits
    assert rows["search_long_word"]["baseline_seconds"] == rows["search_ordinary"]["seconds"]
    def table_lines(text: str) -> int:
        return sum(line.startswith("|") for line in text[text.index("| path | input |"):].splitlines())
    assert table_lines(done.stderr) == 2 + len(rows)         # the header, its rule and one line per call
    assert table_lines((tmp_path / "data" / "bench" / "hostile-latest.md").read_text()) == 2 + len(rows)

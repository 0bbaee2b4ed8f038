"""The command line: `status --json` prints exactly one JSON object; bad input exits 2 with one line."""

from __future__ import annotations

import json

from tests import helpers
from tests.helpers import KAGGLE_JSONL, subprocess_env


def run_cli(data_dir, *args, env_extra=None):
    env = subprocess_env(data_dir, COPILOT_LLM="local", **(env_extra or {}))
    return helpers.run_cli(list(args), env, timeout=300)


def test_import_then_status_json(tmp_path):
    imported = run_cli(tmp_path, "import", str(KAGGLE_JSONL), "--limit", "25", "--json")
    assert imported.returncode == 0, imported.stderr
    counts = json.loads(imported.stdout)
    assert counts["added"] == 25 and counts["seen"] == 25

    status = run_cli(tmp_path, "status", "--json")
    assert status.returncode == 0, status.stderr
    lines = status.stdout.strip().splitlines()
    assert len(lines) == 1
    info = json.loads(lines[0])
    assert info["papers"] == 25 and info["thoughts"] == 0
    assert info["last_ingest"]["status"] == "ok" and info["last_ingest"]["added"] == 25
    assert info["next_ingest"] is not None
    assert info["llm"] == {"backend": "local", "model": "SmolLM2-135M-Instruct.Q4_1"}
    assert info["embedder"] == "all-MiniLM-L6-v2"
    kernels = info["cpu_kernels"]                 # what the installed llama.cpp runs here, against this CPU
    assert "AVX2" in kernels["built_for"] and "AMX_INT8" not in kernels["built_for"]
    assert set(kernels["unused"]) == set(kernels["cpu_has"]) - set(kernels["built_for"])


def test_missing_file_is_one_clear_line(tmp_path):
    result = run_cli(tmp_path, "import", str(tmp_path / "nope.jsonl"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: no such file")


def test_bad_setting_is_one_clear_line(tmp_path):
    result = run_cli(tmp_path, "status", "--json", env_extra={"COPILOT_TOP_K": "lots"})
    assert result.returncode == 2
    assert "COPILOT_TOP_K" in result.stderr and result.stdout == ""


def test_related_json_from_a_stored_paper(tmp_path):
    """`related` through the command line: the query paper from the library, ranked by PRISM (`--method
    prism-hybrid`) with the one-call variant and the real local model (an aspect it fails to write, or that fails
    the gate, is reported as missing and its extractive query stands in), and by the default, which calls no LLM."""
    from tests.conftest import read_rows

    assert run_cli(tmp_path, "import", str(KAGGLE_JSONL), "--limit", "25", "--json").returncode == 0
    query_id = read_rows(KAGGLE_JSONL, 0, 1)[0]["id"]
    related = run_cli(tmp_path, "related", "--arxiv-id", query_id, "--limit", "5", "--method", "prism-hybrid",
                      "--mode", "json", "--json")
    assert related.returncode == 0, related.stderr
    [line] = related.stdout.strip().splitlines()
    result = json.loads(line)
    assert set(result) == {"query", "method", "method_label", "aspects", "missing_aspects", "aspect_queries",
                           "aspect_sources", "notices", "results", "baseline"}
    assert result["method"] == "prism-hybrid"
    assert set(result["aspects"]) | set(result["missing_aspects"]) == {"research_question", "method", "experiments"}
    assert all(result["aspect_sources"][a] == "extractive" for a in result["missing_aspects"]
               if a in result["aspect_queries"])
    assert (result["query"]["id"], result["query"]["source"]) == (query_id, "library")
    assert 0 < len(result["results"]) <= 5 and query_id not in {row["id"] for row in result["results"]}
    assert all(set(row) == {"id", "title", "score", "date", "url", "ranks", "authors"} for row in result["results"])
    plain = run_cli(tmp_path, "related", "--arxiv-id", query_id, "--limit", "5")
    assert plain.returncode == 0, plain.stderr
    assert "Ranked by prism-extractive" in plain.stdout and len(plain.stdout.strip().splitlines()) >= 6

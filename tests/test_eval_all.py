"""`eval all` end to end on the packaged model behind a loopback `llama_cpp.server` (the configured OpenAI-compatible
endpoint), on a trimmed CSFCube and `--quick --limit 2`: plumbing, not figures. Every part runs or says why not, the
judge is refused (the endpoint serves the 135M model), the report has its three files, and a rerun keeps the
finished parts. The full `--quick` run on the packaged model is the documented command in docs/eval-all.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.eval.all_report import PARTS
from copilot.llm import packaged_gguf
from tests.helpers import CSFCUBE, DATA, PAPERS_JSONL, ROOT, llama_server, run_cli, subprocess_env

KEY = "sk-loopback-eval-all"
ALIAS = "SmolLM2-135M-Instruct"


def trimmed_csfcube(out: Path, pool: int = 24, extra: int = 40) -> Path:
    """One query per facet with its first `pool` candidates, their cited rows, and `extra` more abstracts."""
    out.mkdir()
    keep: set[str] = set()
    for facet in ("background", "method", "result"):
        source = next(CSFCUBE.glob(f"*-pid2anns-{facet}.json"))
        pid, ann = next(iter(json.loads(source.read_text()).items()))
        ann = {key: value[:pool] for key, value in ann.items()}
        keep |= {pid, *map(str, ann["cands"])}
        (out / source.name).write_text(json.dumps({pid: ann}))
    qrels = next(CSFCUBE.glob("*-qrels-cited.tsv"))
    lines = qrels.read_text().splitlines()
    rows = [line for line in lines[1:] if line.split("\t")[0] in keep]
    keep |= {line.split("\t")[1] for line in rows}
    (out / qrels.name).write_text("\n".join([lines[0], *rows]) + "\n")
    abstracts = (CSFCUBE / "abstracts-csfcube-from-readable.jsonl").read_text().splitlines()
    chosen = [line for line in abstracts if json.loads(line)["paper_id"] in keep]
    chosen += [line for line in abstracts if json.loads(line)["paper_id"] not in keep][:extra]
    (out / "abstracts-csfcube-from-readable.jsonl").write_text("\n".join(chosen) + "\n")
    return out


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    with llama_server(packaged_gguf(), tmp_path_factory.mktemp("server") / "server.log", ALIAS, KEY) as base:
        yield base


def test_eval_all_runs_every_part_on_the_packaged_model_and_resumes(tmp_path, endpoint):
    if not (CSFCUBE.is_dir() and PAPERS_JSONL.is_file() and (DATA / "related-work").is_dir()):
        pytest.skip("the shared data (../shared/data) is not beside the repository")
    env = subprocess_env(tmp_path / "data", COPILOT_LLM="openai", OPENAI_BASE_URL=endpoint, OPENAI_API_KEY=KEY,
                         COPILOT_LLM_MODEL=ALIAS, COPILOT_SCHEDULER="false", HF_HUB_OFFLINE="1")
    args = ["eval", "all", "--quick", "--limit", "2", "--json", "--csfcube", str(trimmed_csfcube(tmp_path / "csf")),
            "--related-work", str(DATA / "related-work"), "--corpus", str(PAPERS_JSONL),
            "--slim-questions", str(ROOT / "tests" / "data" / "slim-dev.jsonl")]
    done = run_cli(args, env, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    parts = {p["name"]: p for p in report["parts"]}
    assert list(parts) == list(PARTS)
    for part in parts.values():
        assert part["status"] == "ran" and part["effects"] or part["status"] == "failed" and part["reason"], part
        # a measurement that could not show anything (e.g. the same lists both ways) is "not measured", not a zero
        assert all(e["n"] >= 1 and (e["difference"] is not None or e["note"].startswith("not measured: "))
                   for e in part["effects"]), part
    assert parts["csfcube"]["status"] == "ran" and parts["slim"]["status"] == "ran"
    assert parts["thoughts"]["judge"].startswith("not judged: the endpoint's model SmolLM2-135M-Instruct")
    meta = report["meta"]
    assert meta["model"].startswith(ALIAS) and meta["cpu"] and meta["wall_seconds"] > 0 and meta["limit"] == 2
    run_dir = Path(meta["run_dir"])
    assert {p.name for p in run_dir.glob("report.*")} == {"report.md", "report.json", "report.svg"}
    assert "Does each method help?" in (run_dir / "report.md").read_text()

    again = run_cli([*args, "--skip", "gor"], env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    second = {p["name"]: p for p in json.loads(again.stdout)["parts"]}
    assert second["gor"]["status"] == "skipped"
    ran = [name for name, part in parts.items() if part["status"] == "ran" and name != "gor"]
    assert all("finished in an earlier run" in again.stderr for _ in ran) and ran
    assert all(second[name]["seconds"] == parts[name]["seconds"] for name in ran)

"""`bench` and `embed-distill`: the performance benchmark against the anchor, and the fast embedding model."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from copilot.cli.output import print_json
from copilot.embed import distill_static
from copilot.errors import UserError
from copilot.eval import bench_hostile
from copilot.eval.bench import DEFAULT_PARTS, PAPERS_JSONL, PARTS, log, read_papers, run, to_markdown
from copilot.services import Services


def cmd_bench(args: argparse.Namespace) -> int:
    parts = [x.strip() for x in (args.parts or "").split(",") if x.strip()]
    if "hostile" in parts:
        if parts != ["hostile"]:
            raise UserError("--parts hostile runs on its own (its own library and worker processes); run the other "
                            "parts in a second command")
        _hostile(args)
        return 0
    if not PAPERS_JSONL.is_file():
        raise UserError(f"the benchmark needs the shared corpus at {PAPERS_JSONL}")
    try:
        [int(x) for x in (args.ef_search or "").split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--ef-search takes whole numbers separated by commas, not {args.ef_search!r}") from None
    if args.fast_model and not Path(args.fast_model).exists():
        raise UserError(f"no model at {args.fast_model}; make one with `python -m copilot embed-distill`")
    result = run(Services(), args)
    if args.json:
        print(to_markdown(result), file=sys.stderr)
        print_json(result)
    else:
        print(to_markdown(result))
    return 0


def _hostile(args: argparse.Namespace) -> None:
    """`bench --parts hostile`: nothing a user or a paper writes stalls the server (its own runner: a worker process
    per group of calls, each call with a time limit)."""
    if not bench_hostile.PAPERS_JSONL.is_file():
        raise UserError(f"the benchmark needs the shared corpus at {bench_hostile.PAPERS_JSONL}")
    only = [x.strip() for x in (args.hostile_cases or "").split(",") if x.strip()] or None
    result = bench_hostile.run(Services().settings.data_dir, args.call_limit, args.hostile_papers, only,
                               sweep=not args.no_sweep, log=log)
    if args.json:
        print(bench_hostile.to_markdown(result), file=sys.stderr)
        print_json(result)
    else:
        print(bench_hostile.to_markdown(result))


def cmd_distill(args: argparse.Namespace) -> int:
    services = Services()
    out = Path(args.out) if args.out else services.settings.data_dir / "models" / "minilm-static"
    if args.corpus:
        corpus = [p.document for p in read_papers(Path(args.corpus), args.limit)]
    else:
        found = services.store.papers.get(include=["documents"], limit=args.limit)
        corpus = [doc for doc in found["documents"] if doc]
    if not corpus:
        raise UserError("no texts to count token frequencies on: import papers first or pass --corpus FILE")
    started = time.perf_counter()
    log(f"distilling a static model from {args.source or 'the packaged MiniLM'} ({len(corpus):,} corpus texts)")
    path = distill_static(out, corpus, source=args.source, dims=args.dims,
                          progress=lambda done, total: log(f"  {done:,}/{total:,} tokens")
                          if done % 8192 < 512 else None)
    result = {"model": str(path), "seconds": round(time.perf_counter() - started, 1), "corpus_texts": len(corpus),
              "use": f"COPILOT_EMBED_MODEL={path} (then import into a fresh COPILOT_DATA_DIR: vectors differ)"}
    print_json(result) if args.json else print(result["use"])
    return 0


def add_bench_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure ingestion, retrieval, memory, disk and chat overhead vs the anchor")
    p.add_argument("--sizes", default=None, help="corpus sizes, comma-separated (default 1000,10000,100000)")
    p.add_argument("--parts", default=None, help=f"measure only these, comma-separated, of {','.join(PARTS)},hostile "
                   f"(default {','.join(DEFAULT_PARTS)})")
    p.add_argument("--quick", action="store_true", help="small sizes and samples (under two minutes)")
    p.add_argument("--real-papers", type=int, default=None,
                   help="embed at most N real papers for the stores; larger sizes use perturbed copies (default all)")
    p.add_argument("--fast-model", default=None, help="also measure this embedding model (e.g. a static one)")
    p.add_argument("--chat-llm", choices=("instant", "local"), default="instant",
                   help="chat overhead with an instant model (default) or the local model's time subtracted")
    p.add_argument("--ef-search", default=None,
                   help="retrieval: also serve with these HNSW search widths, comma-separated (a fresh process each)")
    p.add_argument("--store-dir", default=None,
                   help="retrieval: keep the built stores here and reuse one built from the same vectors")
    p.add_argument("--call-limit", type=float, default=8.0,
                   help="hostile: the most seconds one call may take before it is reported as over (default 8)")
    p.add_argument("--hostile-papers", type=int, default=300,
                   help="hostile: corpus papers in the library beside the hostile rows (default 300)")
    p.add_argument("--hostile-cases", default=None, help="hostile: only the cases whose names start so, "
                   "comma-separated (e.g. ask_,split_); each hostile case brings its ordinary one")
    p.add_argument("--no-sweep", action="store_true", help="hostile: leave out the sweep of every regex")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("embed-distill", help="make a fast static embedding model from the packaged MiniLM")
    p.add_argument("--out", default=None, help="output directory (default <data dir>/models/minilm-static)")
    p.add_argument("--corpus", default=None, help="JSON-lines snapshot for token frequencies (default: the store)")
    p.add_argument("--limit", type=int, default=20000, help="most corpus texts read (default 20000)")
    p.add_argument("--source", default=None, help="sentence-transformers model path (default: packaged MiniLM)")
    p.add_argument("--dims", type=int, default=256, help="dimensions kept after PCA (default 256)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_distill)

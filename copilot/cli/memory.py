"""`doctor`: do SQLite and Chroma agree about thoughts, is the lexical index in step; `--repair` makes them."""

from __future__ import annotations

import argparse

from copilot.cli.output import print_json
from copilot.features.memory import doctor
from copilot.services import Services


def cmd_doctor(args: argparse.Namespace) -> int:
    report = doctor(Services(), repair=args.repair)
    left = report["after_repair"]["mismatches"] if args.repair else report["mismatches"]
    if args.json:
        print_json(report)
    else:
        print(f"papers: {report['papers']['stored']} stored, "
              f"{len(report['papers']['missing_sources'])} sources of thoughts missing")
        for key, value in report["thoughts"].items():
            print(f"thoughts {key}: {value}")
        print(f"stale thought jobs: {report['stale_jobs']}")
        lexical = report["lexical_index"]
        print(f"lexical index: {lexical['indexed']} papers indexed of {lexical['stored']} stored, "
              f"{'in step' if lexical['in_step'] else 'NOT in step (--repair rebuilds it)'}")
        kernels = report["cpu_kernels"]
        if kernels:
            print(f"llama.cpp CPU kernels: {kernels['variant']}; they use "
                  f"{', '.join(kernels['built_for']) or 'no SIMD extension'}; this CPU also has "
                  f"{', '.join(kernels['unused']) or 'nothing more'} (unused)")
        print(f"mismatches: {report['mismatches']}" + (f", after repair: {left}" if args.repair else ""))
    return 0 if left == 0 else 1


def add_memory_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check that SQLite and Chroma agree about thoughts and that the lexical index "
                       "holds exactly the stored papers (exit 1 if not)")
    p.add_argument("--repair", action="store_true",
                   help="drop vectors without a live row, re-add missing ones, resume stale thought jobs, "
                   "rebuild the lexical index")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_doctor)

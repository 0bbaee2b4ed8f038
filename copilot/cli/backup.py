"""`backup` and `restore`: the app's state to and from a Hugging Face dataset (COPILOT_HUB_BACKUP, HF_TOKEN)."""

from __future__ import annotations

import argparse

from copilot.cli.output import print_json
from copilot.config import load_settings
from copilot.features.backup import backup_now, restore
from copilot.services import Services


def cmd_backup(args: argparse.Namespace) -> int:
    result = backup_now(Services())
    print_json(result) if args.json else print(result)
    return 0 if result["status"] == "ok" else 1


def cmd_restore(args: argparse.Namespace) -> int:
    result = restore(load_settings(), force=args.force)
    print_json(result) if args.json else print(result)
    return 0 if result["status"] in ("ok", "empty") else 1


def add_backup_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backup", help="snapshot the app's state to the Hugging Face dataset COPILOT_HUB_BACKUP")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_backup)
    p = sub.add_parser("restore", help="restore the newest snapshot from COPILOT_HUB_BACKUP into an empty data dir")
    p.add_argument("--force", action="store_true", help="move a non-empty data dir aside first")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_restore)

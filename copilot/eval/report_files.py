"""Writing an evaluation's report files: each one whole or not at all (a temporary file, then a rename)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_files(out_dir: Path, files: dict[str, tuple[str, str]]) -> dict[str, Path]:
    """`files` maps a key to (file name, text); returns the key → the written path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, (name, text) in files.items():
        path = out_dir / name
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        paths[key] = path
    return paths


def json_text(data: dict, indent: int = 2) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False)

"""Sentence roles (methods.sentence_roles): train the classifier and measure it on CSAbstruct-format data.

`python -m copilot train-roles --data DIR` fits the multinomial logistic regression on DIR/train.jsonl, picks its
regularisation on DIR/dev.jsonl (model selection only: the final fit sees train alone) and writes the package's
weights file; `--csfcube FILE` also adds CSFCube's sentence labels as extra, down-weighted training rows (they are
a classifier's predictions in CSAbstruct's five roles, not human labels; kept only when they gain at least
SILVER_MARGIN dev macro-F1).
`python -m copilot eval roles --data PATH` reports accuracy, macro-F1, per-role precision/recall/F1 and the
confusion matrix on a file (or every *.jsonl of a folder) of {"sentences": [...], "labels": [...]} abstracts.

Embedding thousands of sentences takes minutes on 2 cores: vectors are cached under the system's temporary folder,
keyed by the embedder and the texts, never in the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from copilot.eval.report_files import json_text, write_files
from copilot.methods import sentence_roles
from copilot.methods.sentence_roles import ROLES, RoleModel

C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)
SILVER_WEIGHTS = (0.0, 0.3)        # CSFCube rows' weight beside CSAbstruct's 1.0, chosen on dev
SILVER_MARGIN = 0.01               # predicted labels are kept only if they gain this much dev macro-F1 (not noise)
SEED = 13


class RolesDataError(ValueError):
    pass


@dataclass
class Abstracts:
    """Sentences of several abstracts, flattened, with each one's relative position and gold role."""
    sentences: list[str] = field(default_factory=list)
    positions: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    abstracts: int = 0

    def add(self, sentences: Sequence[str], labels: Sequence[str]) -> None:
        kept = [(s, lab, p) for s, lab, p in zip(sentences, labels, sentence_roles.relative_positions(len(sentences)))
                if lab in ROLES and isinstance(s, str) and s.strip()]
        self.sentences += [s for s, _, _ in kept]
        self.labels += [lab for _, lab, _ in kept]
        self.positions += [p for _, _, p in kept]
        self.abstracts += 1


def data_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise RolesDataError(f"no *.jsonl file in {path}")
        return files
    if not path.is_file():
        raise RolesDataError(f"no file or folder at {path}")
    return [path]


def read_csabstruct(path: Path) -> Abstracts:
    """Every abstract of a CSAbstruct-format file or folder: one JSON object per line with `sentences` and
    `labels` (sentences whose label is not one of the five roles are left out)."""
    found = Abstracts()
    for file in data_files(path):
        with file.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    sentences, labels = row["sentences"], row["labels"]
                except (ValueError, KeyError, TypeError):
                    raise RolesDataError(f"{file}:{number} is not a CSAbstruct row ({{\"sentences\": [...], "
                                         "\"labels\": [...]}})") from None
                found.add(sentences, labels)
    if not found.sentences:
        raise RolesDataError(f"no labelled sentence in {path}")
    return found


def read_csfcube(path: Path) -> Abstracts:
    """CSFCube's abstracts cut at their `sentence_spans`, with their (predicted) `sentence_labels`."""
    found = Abstracts()
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            spans, labels = row.get("sentence_spans") or [], row.get("sentence_labels") or []
            text = row.get("abstract") or ""
            found.add([text[a:b] for a, b in spans], [str(lab) for lab in labels])
    return found


def cached_vectors(embedder, sentences: Sequence[str]) -> np.ndarray:
    """The embedder's vectors of `sentences`, cached in the temporary folder by embedder and texts."""
    digest = hashlib.sha1("\x00".join([embedder.name, *sentences]).encode("utf-8")).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "copilot-roles-cache" / f"{digest}.npy"
    if path.is_file():
        return np.load(path)
    vectors = np.asarray(embedder.embed(list(sentences)), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npy")
    np.save(tmp, vectors)
    tmp.replace(path)
    return vectors


def _design(data: Abstracts, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return vectors, sentence_roles.hand_features(data.sentences, data.positions)


def fit(vectors: np.ndarray, hand: np.ndarray, labels: Sequence[str], c: float,
        weights: np.ndarray | None = None) -> RoleModel:
    """Multinomial logistic regression (scikit-learn, lbfgs, deterministic) over [vector, scaled hand features]."""
    from sklearn.linear_model import LogisticRegression

    mean = hand.mean(axis=0)
    scale = hand.std(axis=0)
    scale = np.where(scale > 1e-6, scale, 1.0).astype(np.float32)
    design = np.hstack([vectors, (hand - mean) / scale])
    target = np.array([ROLES.index(label) for label in labels])
    model = LogisticRegression(C=c, max_iter=3000, random_state=SEED)
    model.fit(design, target, sample_weight=weights)
    coef = np.zeros((design.shape[1], len(ROLES)), dtype=np.float32)
    bias = np.full(len(ROLES), -1e4, dtype=np.float32)       # a role absent from training is never predicted
    for column, role_index in enumerate(model.classes_):
        coef[:, role_index] = model.coef_[column]
        bias[role_index] = model.intercept_[column]
    return RoleModel(coef, bias, mean.astype(np.float32), scale)


def scores(gold: Sequence[str], predicted: Sequence[str]) -> dict:
    """Accuracy, macro-F1 over the roles present in gold or predicted, per-role P/R/F1 and support, confusion
    (rows gold, columns predicted, in ROLES order)."""
    confusion = np.zeros((len(ROLES), len(ROLES)), dtype=int)
    for g, p in zip(gold, predicted):
        confusion[ROLES.index(g), ROLES.index(p)] += 1
    per_role = {}
    for n, role in enumerate(ROLES):
        tp, support, said = confusion[n, n], confusion[n].sum(), confusion[:, n].sum()
        precision = tp / said if said else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_role[role] = {"precision": round(float(precision), 4), "recall": round(float(recall), 4),
                          "f1": round(float(f1), 4), "support": int(support)}
    present = [r for n, r in enumerate(ROLES) if confusion[n].sum() or confusion[:, n].sum()]
    total = int(confusion.sum())
    return {"sentences": total, "accuracy": round(float(np.trace(confusion) / total), 4) if total else None,
            "macro_f1": round(float(np.mean([per_role[r]["f1"] for r in present])), 4) if present else None,
            "per_role": per_role, "confusion": {"roles": list(ROLES), "rows_gold": confusion.tolist()}}


def train(embedder, train_dir: Path, csfcube: Path | None = None, out: Path | None = None,
          progress=lambda message: None) -> dict:
    """Fit on train, choose C (and the CSFCube rows' weight) on dev, save the weights; returns what was chosen."""
    train_set = read_csabstruct(train_dir / "train.jsonl")
    dev_set = read_csabstruct(train_dir / "dev.jsonl")
    progress(f"embedding {len(train_set.sentences)} train and {len(dev_set.sentences)} dev sentences")
    train_v, train_h = _design(train_set, cached_vectors(embedder, train_set.sentences))
    dev_v, dev_h = _design(dev_set, cached_vectors(embedder, dev_set.sentences))
    silver = read_csfcube(csfcube) if csfcube else None
    if silver:
        progress(f"embedding {len(silver.sentences)} CSFCube sentences")
        silver_v, silver_h = _design(silver, cached_vectors(embedder, silver.sentences))
    trials = []
    for silver_weight in (SILVER_WEIGHTS if silver else (0.0,)):
        vectors, hand, labels = train_v, train_h, list(train_set.labels)
        weights = np.ones(len(labels), dtype=np.float32)
        if silver and silver_weight:
            vectors, hand = np.vstack([vectors, silver_v]), np.vstack([hand, silver_h])
            labels += silver.labels
            weights = np.concatenate([weights, np.full(len(silver.labels), silver_weight, dtype=np.float32)])
        for c in C_GRID:
            model = fit(vectors, hand, labels, c, weights)
            predicted = [ROLES[i] for i in model.probabilities(dev_v, dev_h).argmax(axis=1)]
            figures = scores(dev_set.labels, predicted)
            trials.append({"c": c, "silver_weight": silver_weight, "dev_accuracy": figures["accuracy"],
                           "dev_macro_f1": figures["macro_f1"], "model": model})
            progress(f"C={c} CSFCube weight={silver_weight}: dev accuracy {figures['accuracy']}, "
                     f"macro-F1 {figures['macro_f1']}")
    best = max(trials, key=lambda t: (t["dev_macro_f1"] - (SILVER_MARGIN if t["silver_weight"] else 0.0),
                                      t["dev_accuracy"]))
    out = Path(out or sentence_roles.WEIGHTS_PATH)
    best["model"].save(out, made_by="python -m copilot train-roles", embedder=embedder.name, c=str(best["c"]),
                       csfcube_weight=str(best["silver_weight"]), seed=str(SEED),
                       trained_on=f"CSAbstruct train ({len(train_set.sentences)} sentences)"
                       + (f" + CSFCube predicted labels ({len(silver.sentences)})" if silver and best["silver_weight"]
                          else ""),
                       dev_accuracy=str(best["dev_accuracy"]), dev_macro_f1=str(best["dev_macro_f1"]))
    return {"weights": str(out), "bytes": out.stat().st_size,
            "chosen": {k: v for k, v in best.items() if k != "model"},
            "trials": [{k: v for k, v in t.items() if k != "model"} for t in trials]}


def evaluate(embedder, path: Path, weights: Path | None = None) -> dict:
    """The classifier's figures on a CSAbstruct-format file or folder, with timing and load."""
    data = read_csabstruct(path)
    model = sentence_roles.load_model(weights)
    vectors = cached_vectors(embedder, data.sentences)
    started = time.perf_counter()
    predicted = sentence_roles.classify(data.sentences, vectors, data.positions, model=model)
    seconds = time.perf_counter() - started
    report = scores(data.labels, predicted)
    report["meta"] = {"data": str(path), "abstracts": data.abstracts, "embedder": embedder.name,
                      "weights": str(weights or sentence_roles.WEIGHTS_PATH),
                      "weights_made": sentence_roles.metadata(weights),
                      "classify_ms_per_64_sentences": round(seconds * 1000 * 64 / max(len(predicted), 1), 3),
                      "load_avg": [round(x, 2) for x in os.getloadavg()]}
    return report


def markdown(report: dict) -> str:
    lines = [f"Sentence roles on {report['meta']['data']}: {report['sentences']} sentences of "
             f"{report['meta']['abstracts']} abstracts; accuracy **{report['accuracy']}**, macro-F1 "
             f"**{report['macro_f1']}**", "", "| role | precision | recall | F1 | support |", "|---|---|---|---|---|"]
    for role, row in report["per_role"].items():
        lines.append(f"| {role} | {row['precision']} | {row['recall']} | {row['f1']} | {row['support']} |")
    lines += ["", "| gold \\ predicted | " + " | ".join(ROLES) + " |", "|---" * (len(ROLES) + 1) + "|"]
    for role, row in zip(ROLES, report["confusion"]["rows_gold"]):
        lines.append(f"| {role} | " + " | ".join(str(n) for n in row) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(report: dict, out_dir: Path, name: str) -> dict[str, Path]:
    return write_files(out_dir, {"json": (f"{name}.json", json_text(report)), "md": (f"{name}.md", markdown(report))})

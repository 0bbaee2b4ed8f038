"""Sentence roles: is an abstract's sentence background, objective, method, result or other?

An answer quotes what a paper *does* or *finds*, never its background ("X has become a key component of …").
The role of a sentence is told by a small classifier: multinomial logistic regression over the sentence's MiniLM
vector (the one quote selection already computes) and a few features that matter for the role — the sentence's
relative position in its abstract, cue phrases ("we propose", "results show", "has become"), digits and percent
signs, length. It is trained on CSAbstruct's train split (its dev split only chose the regularisation) by
`python -m copilot train-roles --data DIR`; the weights ship beside this module (`sentence_roles.npz`, ~10 KB)
and are read once per process. `python -m copilot eval roles --data PATH` measures it on any file in CSAbstruct's
format. Inference is one matrix product: about 0.1 ms for 64 sentences once their vectors exist.
"""

from __future__ import annotations

import logging
import re
import threading
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROLES = ("background", "objective", "method", "result", "other")
QUOTABLE = frozenset({"objective", "method", "result"})   # what a paper does or finds
WEIGHTS_PATH = Path(__file__).with_name("sentence_roles.npz")
log = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]

# Cue phrases, each one feature (1 when the sentence holds it). The classifier weighs them; a cue is a hint, not a rule.
CUES: tuple[tuple[str, str], ...] = (
    # background: the state of the field, its problems
    ("has_become", r"\b(?:has|have) (?:become|emerged|gained|attracted|drawn|shown|been)\b"),
    ("recently", r"\b(?:recent(?:ly)?|increasingly|growing|rapid(?:ly)?|nowadays|in recent years)\b"),
    ("challenge", r"\b(?:challeng\w*|remains?|limited|limitations?|suffers?|struggle\w*|difficult\w*|lack\w*)\b"),
    ("however", r"^(?:however|yet|but|despite|although|while|unfortunately|nevertheless)\b"),
    ("existing", r"\b(?:existing|prior|previous|traditional|conventional|current|state-of-the-art methods)\b"),
    ("important", r"\b(?:important|crucial|essential|critical|fundamental|key|vital|widely used|popular)\b"),
    # objective: what the paper sets out to do
    ("we_propose", r"\bwe (?:propose|present|introduce|develop|design|describe|put forward)\b"),
    ("this_paper", r"\b(?:this|our|the present) (?:paper|work|study|article|thesis|letter)\b"),
    ("we_aim", r"\b(?:we (?:aim|seek|investigate|study|explore|address|examine|focus|ask|consider)|our (?:goal|aim|"
               r"objective)|in order to|to address|to tackle|to this end|to overcome|to bridge)\b"),
    ("novel", r"\b(?:novel|new|first)\b"),
    # method: how
    ("we_use", r"\bwe (?:use|employ|adopt|apply|train|fine-tune|leverage|construct|build|collect|compute|model|"
               r"formulate|define|conduct|perform|evaluate|compare|analy[sz]e|extend)\b"),
    ("consists", r"\b(?:consists? of|composed of|based on|by (?:using|leveraging|combining|exploiting)|which|via|"
                 r"through|module|component|framework|architecture|algorithm|pipeline|mechanism)\b"),
    ("specifically", r"^(?:specifically|first|second|third|then|next|finally|in particular|to do so|concretely)\b"),
    # result: what was found
    ("results_show", r"\b(?:results?|experiments?|evaluations?|analys[ie]s|findings|studies) (?:show|demonstrate|"
                     r"indicate|reveal|suggest|confirm|verify)\w*\b"),
    ("we_show", r"\bwe (?:show|find|found|demonstrate|observe|report|achieve|obtain|confirm)\w*\b"),
    ("outperform", r"\b(?:outperform\w*|surpass\w*|achiev\w*|improv\w*|better|superior|exceed\w*|gains?|"
                   r"state-of-the-art|sota|competitive|comparable|significant(?:ly)?|effective(?:ness)?)\b"),
    ("reduces", r"\b(?:reduc\w*|speed-?ups?|faster|accelerat\w*|fewer|lower|higher|up to|times)\b"),
    ("extensive", r"\b(?:extensive|experimental|empirical(?:ly)?|benchmarks?|datasets?|baselines?)\b"),
    # other: code, data, venue
    ("available", r"(?:https?://|github|\bcode\b|\bpublicly available\b|\bwill be (?:made |publicly )?(?:available|"
                  r"released)\b|\bwe release\b|\bopen-?source\w*\b)"),
    ("future", r"\b(?:future (?:work|research|directions?)|we (?:hope|believe|discuss|conclude)|accepted|"
               r"this (?:version|manuscript)|copyright)\b"),
)
_CUES = tuple(re.compile(pattern, re.I) for _, pattern in CUES)
_NUMBER = re.compile(r"\d")
_PERCENT = re.compile(r"\d\s*(?:%|\\%|percent|per cent|x\b|×)", re.I)
_LATEX = re.compile(r"\\[a-zA-Z]+|\$")
HAND_FEATURES = ("position", "position_sq", "first", "last", "log_words", "digits", "percent", "latex",
                 *(name for name, _ in CUES))


def hand_features(sentences: Sequence[str], positions: Sequence[float]) -> np.ndarray:
    """Per sentence, the features of HAND_FEATURES, unscaled (float32, one row per sentence)."""
    rows = []
    for sentence, position in zip(sentences, positions):
        text = " ".join((sentence or "").split())
        words = len(text.split())
        row = [position, position * position, float(position <= 0.0), float(position >= 1.0), np.log1p(words),
               float(bool(_NUMBER.search(text))), float(bool(_PERCENT.search(text))), float(bool(_LATEX.search(text)))]
        row += [float(bool(cue.search(text))) for cue in _CUES]
        rows.append(row)
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(HAND_FEATURES))


LONE_POSITION = 0.5     # a one-sentence abstract is all of it: not its opening setting (at 0 it was always background)


def relative_positions(count: int) -> list[float]:
    """Positions 0..1 of `count` sentences of one abstract, in order (a lone sentence: LONE_POSITION)."""
    return [n / (count - 1) if count > 1 else LONE_POSITION for n in range(count)]


@dataclass(frozen=True)
class RoleModel:
    """Logistic regression weights over [MiniLM vector, scaled hand features]."""
    weights: np.ndarray      # (dimension + len(HAND_FEATURES), len(ROLES))
    bias: np.ndarray         # (len(ROLES),)
    mean: np.ndarray         # hand features' training mean and scale
    scale: np.ndarray
    roles: tuple[str, ...] = ROLES

    def design(self, vectors: np.ndarray, hand: np.ndarray) -> np.ndarray:
        return np.hstack([np.asarray(vectors, dtype=np.float32), (hand - self.mean) / self.scale])

    def probabilities(self, vectors: np.ndarray, hand: np.ndarray) -> np.ndarray:
        logits = self.design(vectors, hand) @ self.weights + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def save(self, path: Path, **meta: str) -> None:
        """Write the weights (float32) and `meta` strings (how they were made) to `path`, whole or not at all."""
        tmp = path.with_name(path.name + ".tmp.npz")
        arrays: dict[str, np.ndarray] = {
            "weights": self.weights.astype(np.float32), "bias": self.bias.astype(np.float32),
            "mean": self.mean.astype(np.float32), "scale": self.scale.astype(np.float32),
            "roles": np.array(self.roles), "features": np.array(HAND_FEATURES),
            **{f"meta_{key}": np.array(value) for key, value in meta.items()}}
        np.savez_compressed(tmp, allow_pickle=False, **arrays)
        tmp.replace(path)


class RoleModelError(RuntimeError):
    pass


_loaded: dict[Path, RoleModel] = {}
_broken: dict[Path, str] = {}        # weights that could not be read, and why: read and logged once per process
_lock = threading.Lock()


def load_model(path: Path | None = None) -> RoleModel:
    """The shipped weights (or those at `path`), read once per process; a file that cannot be read raises
    RoleModelError each time, and is read and logged once."""
    path = Path(path or WEIGHTS_PATH)
    with _lock:
        if path in _broken:
            raise RoleModelError(_broken[path])
        if path not in _loaded:
            try:
                _loaded[path] = _read(path)
            except RoleModelError as error:
                _broken[path] = str(error)
                log.warning("%s; answers tell sentences' roles by cue phrases until then", error)
                raise
        return _loaded[path]


def _read(path: Path) -> RoleModel:
    try:
        with np.load(path) as data:
            features = tuple(str(f) for f in data["features"])
            if features != HAND_FEATURES:
                raise RoleModelError(f"the sentence-role weights at {path} were trained with other features; "
                                     "retrain them with `python -m copilot train-roles`")
            return RoleModel(data["weights"], data["bias"], data["mean"], data["scale"],
                             tuple(str(r) for r in data["roles"]))
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise RoleModelError(f"cannot read the sentence-role weights at {path}: {error}; retrain them "
                             "with `python -m copilot train-roles --data DIR`") from None


def weights_problem(path: Path | None = None) -> str | None:
    """Why the weights cannot be used (None: they can); the reason is logged once."""
    try:
        load_model(path)
    except RoleModelError as error:
        return str(error)
    return None


def metadata(path: Path | None = None) -> dict[str, str]:
    """How the weights at `path` (default: the shipped ones) were made."""
    with np.load(Path(path or WEIGHTS_PATH)) as data:
        return {key[5:]: str(data[key]) for key in data.files if key.startswith("meta_")}


def probabilities(sentences: Sequence[str], vectors: np.ndarray | None = None,
                  positions: Sequence[float] | None = None, embed: Embed | None = None,
                  model: RoleModel | None = None) -> np.ndarray:
    """(len(sentences), len(ROLES)) role probabilities; see `classify` for the arguments."""
    sentences = [s if isinstance(s, str) else "" for s in sentences]
    if not sentences:
        return np.zeros((0, len(ROLES)), dtype=np.float32)
    if positions is None:
        positions = relative_positions(len(sentences))
    if len(positions) != len(sentences):
        raise ValueError(f"{len(sentences)} sentences but {len(positions)} positions")
    if vectors is None:
        if embed is None:
            raise ValueError("give the sentences' vectors or an embed function")
        vectors = np.asarray(embed(list(sentences)), dtype=np.float32)
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(sentences), -1)
    model = model or load_model()
    clipped = [min(max(float(p), 0.0), 1.0) for p in positions]
    return model.probabilities(vectors, hand_features(sentences, clipped))


def classify(sentences: Sequence[str], vectors: np.ndarray | None = None, positions: Sequence[float] | None = None,
             embed: Embed | None = None, model: RoleModel | None = None) -> list[str]:
    """The role of each sentence, one of ROLES.

    `vectors`: the sentences' unit-normalised MiniLM vectors (rows in order) when the caller has them; otherwise
    `embed(list[str]) -> np.ndarray` makes them. `positions`: each sentence's relative position in its own abstract,
    0 (first) to 1 (last); None means the sentences are one abstract, in order. Sentences of several abstracts may
    be classified in one call when their positions are given."""
    found = probabilities(sentences, vectors, positions, embed, model)
    roles = (model or load_model()).roles if len(found) else ROLES
    return [roles[int(n)] for n in found.argmax(axis=1)]


def fits(vectors: np.ndarray) -> bool:
    """Whether the shipped weights can read vectors of this width (another embedder's are not MiniLM's)."""
    try:
        width = load_model().weights.shape[0] - len(HAND_FEATURES)
    except RoleModelError:
        return False
    return np.ndim(vectors) == 2 and np.shape(vectors)[1] == width


def trained_for(embedder_name: str) -> bool:
    """Whether the shipped weights were trained on vectors of this embedder (or its ONNX copy); False, and logged
    once, when they cannot be read."""
    if weights_problem() is not None:
        return False
    try:
        return embedder_name.startswith(metadata().get("embedder") or "\0")
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        return False


def is_background(label: str) -> bool:
    return label == "background"


def is_quotable(label: str) -> bool:
    """Whether a sentence of this role states what a paper does or finds (objective, method or result)."""
    return label in QUOTABLE

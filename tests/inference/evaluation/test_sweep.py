"""Sweeps over cached evaluator outputs: hand-made records, and a real run re-fused with no model call."""

from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evidential import FusionConfig, fuse, opinions_from_evidence, route  # noqa: E402
from evidential.errors import ConfigError  # noqa: E402
from inference.evaluation.sweep import (  # noqa: E402
    DEFAULT_TAUS,
    SweepGrid,
    evidence_batch,
    parse_lams,
    parse_taus,
    run_sweep,
)
from inference.types import DataError  # noqa: E402


def _record(evidence: list[list[float]], claims: list[str]) -> dict:
    ids = [f"c{j}" for j in range(len(claims))]
    return {
        "claims": [{"id": i, "text": t, "chunk_ids": [], "forms": [t]} for i, t in zip(ids, claims)],
        "chunks": [
            {"chunk_id": f"d{t}", "evidence": {i: v for i, v in zip(ids, row) if v}}
            for t, row in enumerate(evidence)
        ],
    }


def test_evidence_batch_rebuilds_padded_tensors():
    recs = [_record([[3.0, 0.0], [0.0, 3.0]], ["Paris", "Lyon"]), _record([[2.0]], ["yes"])]
    b = evidence_batch(recs)
    assert b.evidence.shape == (2, 2, 2)
    assert b.evidence[0].tolist() == [[3.0, 0.0], [0.0, 3.0]]
    assert b.evidence[1].tolist() == [[2.0, 0.0], [0.0, 0.0]]
    assert b.chunk_mask.tolist() == [[True, True], [True, False]]
    assert b.claim_mask.tolist() == [[True, True], [True, False]]
    # padding changes nothing: the batched fusion equals each record's own fusion
    res = fuse(opinions_from_evidence(b.evidence, b.claim_mask, b.chunk_mask), lam=0.6)
    own = fuse(opinions_from_evidence(torch.tensor([[2.0]], dtype=torch.float64)), lam=0.6)
    assert res.uncertainty[1].item() == pytest.approx(own.uncertainty.item())
    # Yager on the worked example of docs/method.md (b = (0.6, 0) and (0, 0.6) ⇔ e = 3 with M = 2)
    y = fuse(opinions_from_evidence(b.evidence[:1], b.claim_mask[:1], b.chunk_mask[:1]), rule="yager")
    assert y.belief[0].tolist() == pytest.approx([0.24, 0.24]) and y.uncertainty.item() == pytest.approx(0.52)
    assert route(y, 0.35, 0.65).names == ["conflict"]


def test_evidence_batch_refuses_records_without_evidence():
    with pytest.raises(DataError, match="no per-chunk evidence"):
        evidence_batch([{"question": "q", "response": "a", "chunks": [{"chunk_id": "d0"}], "claims": []}])
    bad = _record([[1.0]], ["x"])
    bad["chunks"][0]["evidence"] = {"zz": 1.0}
    with pytest.raises(DataError, match="claim 'zz'"):
        evidence_batch([bad])


def test_grid_and_parsers_validate():
    assert parse_taus("0.3:0.6, 0.35:0.65") == [(0.3, 0.6), (0.35, 0.65)]
    assert parse_lams("0,0.5,1") == [0.0, 0.5, 1.0]
    with pytest.raises(ConfigError, match="TAU1:TAU2"):
        parse_taus("0.3-0.6")
    with pytest.raises(ConfigError, match="0 <= tau1 < tau2"):
        SweepGrid(taus=[(0.7, 0.3)])
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        SweepGrid(lams=[1.5])
    with pytest.raises(ConfigError, match="unknown fusion rule 'mean'"):
        SweepGrid(rules=["mean"])
    settings = SweepGrid().settings(FusionConfig())
    assert sum(s.table == "10" for s in settings) == len(DEFAULT_TAUS) == 24  # 5 × 5 pairs less (0.5, 0.5)
    assert {s.rule for s in settings if s.table == "12"} == {"average", "lambda"}
    assert {s.policy for s in settings if s.table == "12"} == {"paper", "direct"}
    # the stated-set bars, each with and without the edited-copy rule, at the run's λ and τ
    stated = [(s.state_ratio, s.copy_overlap) for s in settings if s.table == "stated"]
    assert stated == [(r, o) for r in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) for o in (0.8, None)]
    off = SweepGrid(state_ratios=[0.5]).settings(FusionConfig(copy_overlap=None))
    assert [(s.state_ratio, s.copy_overlap) for s in off if s.table == "stated"] == [(0.5, None)]
    with pytest.raises(ConfigError, match="--state-ratio"):
        SweepGrid(state_ratios=[1.2])
    with pytest.raises(ConfigError, match="--state-ratio must be comma-separated"):
        parse_lams("0.2,x", "--state-ratio")


class CallCounter:
    """Counts calls of the real model entry points (wrapping them, the real function still runs)."""

    def __init__(self, monkeypatch):
        import inference.backends as backends
        import inference.evaluators as evaluators
        from inference.backends.transformers_backend import TransformersBackend
        from inference.evaluators.learned import LearnedEvaluator

        self.calls: dict[str, int] = {}
        for owner, name in (
            (backends, "load_backend"),
            (evaluators, "build_evaluator"),
            (LearnedEvaluator, "evaluate_batch"),
            (TransformersBackend, "generate"),
            (torch.nn.Module, "__call__"),
        ):
            self._wrap(monkeypatch, owner, name)

    def _wrap(self, monkeypatch, owner, name):
        real = getattr(owner, name)
        key = f"{getattr(owner, '__name__', owner)}.{name}"
        self.calls[key] = 0

        def spy(*args, **kwargs):
            self.calls[key] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, spy)


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory, shared_data):
    """A real evaluation: the shipped learned checkpoint, template answers, 6 RAMDocs questions, 2 seeds."""
    from inference.config import load_config
    from inference.evaluation.runner import EvaluateOptions, run_evaluation

    cfg = load_config(None, ["generator.name=template", "evaluator.name=learned"])
    out = tmp_path_factory.mktemp("sweep") / "run"
    opts = EvaluateOptions(
        dataset="ramdocs",
        out=out,
        data=str(shared_data / "ramdocs" / "RAMDocs_test.jsonl"),
        systems=["evidential-learned"],
        seeds=[42, 123],
        limit=6,
        batch_size=3,
    )
    metrics = run_evaluation(opts, cfg, progress=False)
    return out, metrics


def test_sweep_of_a_real_run_makes_no_model_call(learned_run, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from inference.cli import app

    run_dir, _ = learned_run
    counter = CallCounter(monkeypatch)
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "--from",
            str(run_dir),
            "--out",
            str(tmp_path / "sw"),
            "--lam",
            "0,0.6,1",
            "--tau",
            "0.3:0.6",
        ],
    )
    assert result.exit_code == 0, result.output
    assert counter.calls and all(v == 0 for v in counter.calls.values()), counter.calls
    torch.nn.Linear(2, 1)(torch.ones(2))  # the spies do count: a positive control
    assert counter.calls["Module.__call__"] == 1
    sweep = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert sweep["model_calls"] == 0
    entries = sweep["systems"]["evidential-learned"]["settings"]
    names = [e["setting"]["name"] for e in entries]
    assert names[:4] == ["run setting", "lambda λ=0", "lambda λ=0.6", "lambda λ=1"]
    assert "w/o conflict-preserving fusion (evidence averaging)" in names and "policy decomposed" in names
    base = entries[0]
    # the run used the template generator: re-fusing at its own setting reproduces every route and score
    assert base["reproduced_routes"] == {"same": 12, "n": 12}
    generated = sweep["systems"]["evidential-learned"]["generated"]["mean_std"]
    for key in ("accuracy", "strict_em", "abstention_rate", "route_direct", "ece"):
        assert base["mean_std"][key] == generated[key], key
    # the run was calibrated (the default, calibration: auto): the sweep re-fuses the scaled evidence around
    # the fusion setting the records ran with, and says so
    rec = json.loads((run_dir / "evidential-learned.jsonl").read_text().splitlines()[0])["record"]
    applied = sweep["systems"]["evidential-learned"]["calibration"]
    assert applied["file"] == rec["calibration"]["file"] and applied["scale"] == rec["calibration"]["scale"]
    assert {k: base["setting"][k] for k in ("lam", "tau1", "tau2", "state_ratio")} == {
        k: rec["fusion"][k] for k in ("lam", "tau1", "tau2", "state_ratio")
    }
    # Yager = λ 1 (same routes, same scores)
    lam1 = next(e for e in entries if e["setting"]["name"] == "lambda λ=1")
    yager = next(e for e in entries if e["setting"]["name"] == "yager")
    assert lam1["mean_std"] == yager["mean_std"]
    # no routing: every route is direct
    nr = next(e for e in entries if e["setting"]["name"].startswith("w/o routing"))
    assert nr["mean_std"]["route_direct"]["mean"] == 1.0
    # greedy/template: the second seed reuses the first, so every std is 0
    assert all(v["std"] in (0.0, None) for v in base["mean_std"].values())
    md = (tmp_path / "sw" / "sweep.md").read_text()
    for title in ("Table 9", "Table 10", "Table 12", "Routing policy", "Stated-set bar", "Prompt vs learned"):
        assert title in md


def test_sweep_matches_fusing_each_record_directly(learned_run):
    """Every swept route equals evidential.fuse + route on that one record's evidence (λ 0.2, τ 0.3/0.6)."""
    from inference.evaluation.datasets import EvalInstance
    from inference.evaluation.judges import build_judge
    from inference.evaluation.rows import load_rows
    from inference.evaluation.sweep import SweepSetting, refuse_rows
    from inference.types import Chunk

    run_dir, _ = learned_run
    rows = [r for r in load_rows(run_dir / "evidential-learned.jsonl") if r["seed"] == 42]
    insts = {}
    for line in (run_dir / "instances.jsonl").read_text().splitlines():
        p = json.loads(line)
        insts[p["instance"]["id"]] = (
            EvalInstance.from_dict(p["instance"]),
            [Chunk(**c) for c in p["chunks"]],
        )
    setting = SweepSetting("x", "9", "lambda", 0.2, 0.3, 0.6, "paper")
    new = refuse_rows(rows, evidence_batch([r["record"] for r in rows]), setting, insts, build_judge("label"))
    for r, n in zip(rows, new):
        rec = r["record"]
        ev = torch.tensor(
            [[ch["evidence"].get(c["id"], 0.0) for c in rec["claims"]] for ch in rec["chunks"]],
            dtype=torch.float64,
        )
        res = fuse(opinions_from_evidence(ev), lam=0.2)
        assert n["record"]["route"] == route(res, 0.3, 0.6).names
        assert n["record"]["uncertainty"] == pytest.approx(res.uncertainty.item(), abs=1e-6)
        assert n["judge"]["judge"] == "label/1.3"


def test_report_embeds_the_sweep_tables(learned_run):
    run_dir, metrics = learned_run
    report = (run_dir / "report.md").read_text()
    assert "Sweeps and ablations" in report and "Table 12 — ablations" in report
    assert metrics["sweep"] == [str(run_dir / "sweep" / "sweep.json"), str(run_dir / "sweep" / "sweep.md")]


def test_sweep_errors_are_clear(tmp_path, learned_run):
    with pytest.raises(DataError, match="not an evaluation run"):
        run_sweep(tmp_path)
    run_dir, _ = learned_run
    with pytest.raises(ConfigError, match="cannot sweep naive"):
        run_sweep(run_dir, systems=["naive"], write=False)
    with pytest.raises(ConfigError, match="--reference 'corrective'"):
        run_sweep(run_dir, reference="corrective", write=False)

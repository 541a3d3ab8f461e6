import json

from typer.testing import CliRunner

import evidential
from inference.cli import app
from inference.config import RunConfig
from training.utils.text import normalize_text

runner = CliRunner()


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_version_and_help():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and evidential.__version__ in r.stdout
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0 and "fuse" in r.stdout and "demo" in r.stdout


def test_fuse_yager_design_vector():
    out = _json(runner.invoke(app, ["fuse", "--evidence", "[[3,0],[0,3]]", "--rule", "yager", "--json"]))
    assert out["U_global"] == 0.52
    assert out["fused"]["belief"] == {"a1": 0.24, "a2": 0.24}
    assert out["ignorance"] == 0.16 and out["conflict"] == 0.36
    assert out["mean_pairwise_conflict"] == 0.36 and out["step_conflict"] == [0.36]
    assert out["confidence"] == 0.24 and out["route"] == "conflict"
    assert out["opinions"][0] == {"chunk": 0, "belief": {"a1": 0.6, "a2": 0.0}, "vacuity": 0.4}


def test_fuse_flags_config_and_claim_names(tmp_path):
    out = _json(
        runner.invoke(
            app, ["fuse", "-e", "[[3,0],[0,3]]", "--rule", "dempster", "--claims", "Paris,Lyon", "--json"]
        )
    )
    assert out["fused"]["belief"] == {"Paris": 0.375, "Lyon": 0.375} and out["route"] == "direct"
    out = _json(
        runner.invoke(
            app, ["fuse", "-e", "[[3,0],[0,3]]", "--config", "paper", "--set", "fusion.lam=0", "--json"]
        )
    )
    assert out["U_global"] == 0.16 and out["config"]["lam"] == 0.0
    out = _json(
        runner.invoke(app, ["fuse", "-e", "[[3,0],[0,3]]", "--set", "fusion.lam=0", "--lam", "1", "--json"])
    )
    assert out["U_global"] == 0.52  # explicit flags win over --set
    f = tmp_path / "ev.json"
    f.write_text("[[20, 0], [0, 20]]")
    out = _json(
        runner.invoke(app, ["fuse", "-e", f"@{f}", "--rule", "yager", "--policy", "decomposed", "--json"])
    )
    assert out["route"] == "conflict" and out["U_global"] > 0.65


def test_fuse_edge_cases():
    out = _json(runner.invoke(app, ["fuse", "-e", "[]", "--json"]))
    assert out["U_global"] == 1.0 and out["route"] == "abstain" and out["selected_claim"] is None
    out = _json(runner.invoke(app, ["fuse", "-e", "[[4, 1]]", "--json"]))
    assert out["fused"]["belief"] == out["opinions"][0]["belief"]


def test_fuse_table_output():
    r = runner.invoke(app, ["fuse", "-e", "[[3,0],[0,3]]", "--claims", '["Paris", "Lyon"]'])
    assert r.exit_code == 0
    assert "U_global" in r.stdout and "0.3760" in r.stdout and "Paris" in r.stdout and "conflict" in r.stdout


def test_fuse_bad_input_exits_2_with_a_message():
    cases = [
        (["-e", "[[3,0],[0"], "not valid JSON"),
        (["-e", "[[3,0],[0]]"], "different lengths"),
        (["-e", "[[3,-1]]"], "--evidence[0, 1]"),
        (["-e", '[[3,"x"]]'], "not a number"),
        (["-e", "[[3,0]]", "--lam", "2"], "fusion.lam"),
        (["-e", "[[3,0]]", "--tau1", "0.8"], "tau1"),
        (["-e", "[[3,0]]", "--rule", "avg"], "fusion.rule"),
        (["-e", "[[3,0]]", "--claims", "a,b,c"], "--claims"),
        (["-e", "[[3,0]]", "--set", "fusion.bogus=1"], "fusion.bogus"),
        (["-e", "@/no/such/file.json"], "not found"),
    ]
    for args, msg in cases:
        r = runner.invoke(app, ["fuse", *args])
        assert r.exit_code == 2, (args, r.output)
        assert msg in r.stderr.replace("\n", ""), (args, r.stderr)


def test_fuse_sanitize():
    r = runner.invoke(app, ["fuse", "-e", "[[3,-1],[0,3]]", "--sanitize", "--json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["opinions"][0]["belief"] == {"a1": 0.6, "a2": 0.0}
    assert "sanitized 1" in r.stderr and "--evidence[0, 1] = -1.0" in r.stderr


def test_oracle_demo_writes_its_output_folder(tmp_path):
    out_dir = tmp_path / "demo"
    r = runner.invoke(app, ["demo", "--oracle", "--output", str(out_dir), "--json"])
    summary = _json(r)
    by = summary["by_kind"]
    assert by["all"]["n"] == 36 and by["answerable"]["routes"]["direct"] == 12
    assert by["misinformation"]["mean_U"] > by["answerable"]["mean_U"]
    assert by["misinformation"]["mean_conflict"] > by["answerable"]["mean_conflict"]
    assert sorted(p.name for p in out_dir.iterdir()) == ["records.jsonl", "run.json", "summary.json"]
    rows = [json.loads(line) for line in (out_dir / "records.jsonl").read_text().splitlines()]
    assert len(rows) == 36
    row = rows[0]
    for key in (
        "query",
        "route",
        "selected_claim",
        "fused_masses",
        "U_global",
        "ignorance",
        "conflict",
        "mean_pairwise_conflict",
        "confidence",
        "chunk_evidence",
    ):
        assert key in row
    assert abs(sum(row["fused_masses"].values()) + row["U_global"] - 1) < 1e-5
    run = json.loads((out_dir / "run.json").read_text())
    assert run["config"]["fusion"]["lam"] == 0.6 and run["seed"] == 0 and "torch" in run["versions"]


def test_demo_on_the_shared_file_and_bad_data(shared_data, tmp_path):
    summary = _json(
        runner.invoke(
            app,
            [
                "demo",
                "--oracle",
                "--data",
                str(shared_data / "ramdocs" / "RAMDocs_test.jsonl"),
                "--output",
                str(tmp_path / "d"),
                "--json",
                "--set",
                "fusion.policy=decomposed",
            ],
        )
    )
    assert summary["by_kind"]["all"]["n"] == 347
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": 1}\n')
    for mode in (["--oracle"], []):
        r = runner.invoke(app, ["demo", *mode, "--data", str(bad), "--output", str(tmp_path / "e")])
        assert r.exit_code == 2 and "bad.jsonl:1" in r.stderr
        assert not (tmp_path / "e").exists()


def test_pipeline_demo_on_the_shipped_sample(tmp_path):
    """The main job: index the sample's documents, retrieve, learned evaluator, fuse, route, generate."""
    out_dir = tmp_path / "demo"
    r = runner.invoke(
        app, ["demo", "--limit", "4", "--output", str(out_dir), "--json", "--set", "generator.name=template"]
    )
    summary = _json(r)
    assert summary["by_kind"]["all"]["n"] == 4 and summary["evaluator"] == "learned"
    assert sum(summary["by_kind"]["all"]["routes"].values()) == 4
    assert {"records.jsonl", "run.json", "summary.json", "corpus.jsonl", "index"} <= {
        p.name for p in out_dir.iterdir()
    }
    rows = [json.loads(line) for line in (out_dir / "records.jsonl").read_text().splitlines()]
    assert [len(r["retrieval"]["chunks"]) for r in rows] == [RunConfig().k] * 4
    for row in rows:
        assert row["retrieval"]["reranked"] is False and row["evaluator"] == "learned"
        gold = {normalize_text(g) for g in row["gold_answers"]}
        assert row["selected_is_gold"] == (
            row["answer"] is not None and normalize_text(row["answer"]) in gold
        )
        assert 0 <= row["own_documents"] <= RunConfig().k
    # retrieval finds the questions' own documents
    assert summary["by_kind"]["all"]["own_documents_at_k"] >= 2
    run = json.loads((out_dir / "run.json").read_text())
    assert run["mode"] == "pipeline" and run["config"]["evaluator"]["name"] == "learned"


def _commands(group, prefix=()):
    """Every command path of a click group: ``("demo",)``, ``("audit", "export")``, ..."""
    for name, cmd in group.commands.items():
        yield (*prefix, name)
        if hasattr(cmd, "commands"):  # a group
            yield from _commands(cmd, (*prefix, name))


def test_every_help_is_legible_at_80_columns():
    import typer.main

    paths = [(), *_commands(typer.main.get_command(app))]
    assert ("demo",) in paths and ("evaluate",) in paths and ("audit", "export") in paths
    for path in paths:
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0, (path, r.output)
        lines = r.stdout.splitlines()
        assert lines[0].startswith("Usage: evidential-rag"), (path, lines[0])
        too_long = [line for line in lines if len(line) > 80]
        assert not too_long, (path, too_long)
        assert "…" not in r.stdout  # nothing cut short


def test_demo_says_which_generator_wrote_each_answer(tmp_path):
    out_dir = tmp_path / "demo"
    r = runner.invoke(app, ["demo", "--limit", "2", "--output", str(out_dir)])
    assert r.exit_code == 0, r.output
    assert r.stdout.count("response (template): ") == 2 and "responses written by: template 2" in r.stdout
    assert "[sources: " in r.stdout  # the template's citation is printed, not taken for markup
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["generator"] == "template" and summary["written_by"] == {"template": 2}
    r = runner.invoke(app, ["demo", "--limit", "1", "--output", str(out_dir), "--generator", "gpt"])
    assert r.exit_code == 2 and "--generator must be one of template, llm" in r.stderr

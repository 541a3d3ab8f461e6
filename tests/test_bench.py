"""The benchmark runs end to end (tiny sizes; no timing is asserted: speed claims live in bench/)."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_fusion_benchmark_prints_its_json_line():
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "fusion.py"),
            "--sizes",
            "500,2000",
            "--repeats",
            "1",
            "--loop-queries",
            "200",
            "--torch-loop-queries",
            "10",
            "--no-compile",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(last) >= {"queries_per_s", "speedup_vs_loop", "ratio_to_read_once"}
    assert last["B"] == 2000 and last["queries_per_s"] > 0 and last["path"] == "eager"
    assert "python loop" in out.stdout and "read once" in out.stdout


def test_soak_benchmark_short_form():
    """bench/soak.py for 8 s: mixed valid, malformed and oversized requests to a real `serve` process;
    every request answered, no 5xx but 503 (a full queue), memory sampled with its slope."""
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "soak.py"), "--seconds", "8", "--rate", "4", "--sample-s", "2",
         "--set", "generator.name=template", "--out", "/dev/null"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rep = json.loads(out.stdout.strip().splitlines()[-1])
    assert rep["requests"] >= 30 and rep["served"] == rep["requests"] and not rep["transport_errors"]
    codes = {int(c) for c in rep["status_codes"]}
    assert codes <= {200, 400, 413, 422, 503} and 200 in codes and 422 in codes and 413 in codes, rep[
        "status_codes"
    ]
    assert rep["by_kind"]["oversized"].keys() == {"413"} and set(rep["by_kind"]["broken"]) <= {"400", "422"}
    assert len(rep["rss_mib"]) >= 4 and rep["p99_ms"] >= rep["p50_ms"] > 0
    assert isinstance(rep["rss_slope_mib_per_min"], float)


def test_index_scale_benchmark_smoke():
    """bench/index_scale.py on 3000 × 64-d vectors, in one process: every type built, read and memory-mapped,
    recall against exact search, the markdown table and the JSON line."""
    types = ["Flat", "HNSW16", "IVF16,Flat", "IVF16,PQ8x4np"]
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "index_scale.py"), "--vectors", "3000", "--dim", "64",
         "--types", ";".join(types), "--queries", "20", "--train-size", "1000", "--nprobe", "16", "--in-process"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {r["type"]: r for r in json.loads(out.stdout.strip().splitlines()[-1])["rows"]}
    assert list(rows) == types and all(r["invalid_ids"] == 0 for r in rows.values())
    assert rows["Flat"]["recall"] == 1.0 and rows["IVF16,Flat"]["recall"] >= 0.99  # nprobe = nlist: exact
    assert rows["IVF16,PQ8x4np"]["disk_mib"] < rows["Flat"]["disk_mib"] / 4
    assert rows["IVF16,Flat"]["mmap_read"] == "inverted lists (IO_FLAG_MMAP)"
    assert rows["HNSW16"]["params"] == {"efSearch": 64} and rows["IVF16,Flat"]["params"] == {"nprobe": 16}
    assert "| `IVF16,PQ8x4np` |" in out.stdout and "(1×)" in out.stdout


RAMDOCS = REPO.parent / "shared" / "data" / "ramdocs" / "RAMDocs_test.jsonl"


def _bench(script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``bench/<script>`` offline with ``args`` (output captured; 300 s at most)."""
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def test_extraction_benchmark_counts_recall(tmp_path):
    import pytest

    if not RAMDOCS.is_file():
        pytest.skip("../shared/data/ramdocs is absent")
    out = tmp_path / "extraction.json"
    _bench("extraction.py", "--questions", "6", "--n", "3", "--out", str(out))
    got = json.loads(out.read_text())
    assert got["correct"]["documents"] > 0
    r = [got["correct"][f"recall@{i}"] for i in (1, 2, 3)]
    assert all(0.0 <= x <= 1.0 for x in r) and r == sorted(r)  # recall grows with n


def test_span_fidelity_benchmark_measures_checkpoints_on_the_same_rows(
    tmp_path, tiny_checkpoint, shared_data
):
    import yaml

    ramdocs = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    config = tmp_path / "tiny.yaml"
    config.write_text(
        yaml.safe_dump(
            {"data": [{"name": "ramdocs", "path": str(ramdocs), "limit": 12}], "validation_fraction": 0.25}
        )
    )
    out = tmp_path / "fidelity.json"
    ckpt = str(tiny_checkpoint)
    res = _bench(
        "span_fidelity.py",
        "--config",
        str(config),
        "--checkpoint",
        ckpt,
        "--checkpoint",
        ckpt,
        "--out",
        str(out),
    )
    got = json.loads(out.read_text())
    first, again = got["checkpoints"]  # the same checkpoint twice: the same rows, the same fidelity
    assert got["validation_queries"] > 0 and first["rows"] == again["rows"] > 0
    assert 0.0 <= first["span_fidelity"] == again["span_fidelity"] <= 1.0
    # one line per checkpoint and source (all, then each source: here RAMDocs only)
    assert res.stdout.count(f"| {ckpt} | all |") == 2 and res.stdout.count(f"| {ckpt} | ramdocs |") == 2
    assert "span fidelity" in res.stdout and "fidelity on them" in res.stdout
    assert set(first["by_source"]) == {"all", "ramdocs"} and first["by_source"] == again["by_source"]
    assert first["by_source"]["all"]["rows"] == first["rows"] == first["by_source"]["ramdocs"]["rows"]
    # RAMDocs documents nearly always state their labelled answer, so some rows count as stated
    assert 0 < first["rows_stated"] <= first["rows"]
    assert 0.0 <= first["span_fidelity_stated"] <= 1.0
    bad_out = tmp_path / "bad.json"
    bad = _bench(
        "span_fidelity.py",
        "--config",
        str(config),
        "--checkpoint",
        str(tmp_path / "missing"),
        "--out",
        str(bad_out),
        check=False,
    )
    assert bad.returncode == 2 and "missing" in bad.stderr and "Traceback" not in bad.stderr
    assert not bad_out.exists()

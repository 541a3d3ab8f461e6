"""The benchmark runs end to end (tiny sizes; no timing is asserted: speed claims live in bench/)."""

import json
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

"""The public contracts users' scripts depend on, compared with the ones recorded in ``tests/contracts.json``:
every CLI command and its flags, and every key path of the answer record ``ask --json`` prints.

A change that removes or renames one fails here; an addition fails too, so that extending a contract is a
deliberate edit of ``tests/contracts.json``.
"""

import json
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from inference.cli import app
from inference.ramdocs import SAMPLE_PATH

CONTRACTS = json.loads((Path(__file__).parent / "contracts.json").read_text(encoding="utf-8"))


def _options(command, prefix: str = "") -> dict[str, list[str]]:
    if hasattr(command, "commands"):
        out: dict[str, list[str]] = {}
        for name, sub in command.commands.items():
            out.update(_options(sub, f"{prefix}{name} "))
        return out
    flags = [opt for p in command.params for opt in (*p.opts, *p.secondary_opts)]
    return {prefix.strip(): sorted(flags)}


def _key_paths(value, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        out = set()
        for key, item in value.items():
            out |= {prefix + key, *_key_paths(item, f"{prefix}{key}.")}
        return out
    if isinstance(value, list):
        return set().union(*(_key_paths(item, prefix + "[].") for item in value)) if value else set()
    return set()


def test_cli_commands_and_flags_are_unchanged():
    assert _options(typer.main.get_command(app)) == CONTRACTS["cli_options"]


def test_ask_json_record_keys_are_unchanged(tmp_path):
    record = json.loads(SAMPLE_PATH.read_text(encoding="utf-8").splitlines()[0])
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": d["text"]}) + "\n" for i, d in enumerate(record["documents"])
        ),
        encoding="utf-8",
    )
    args = ["ask", record["question"], "--chunks", str(chunks), "--json", "--set", "generator.name=template"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["claims"], "the record must extract claims so that the claim keys are compared too"
    assert sorted(_key_paths(answer)) == CONTRACTS["ask_record_keys"]

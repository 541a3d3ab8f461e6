import json
import os

import pytest

from inference.io import atomic_write_text, write_json, write_jsonl


def test_atomic_write_replaces_only_on_success(tmp_path, monkeypatch):
    target = tmp_path / "out" / "summary.json"
    write_json(target, {"good": 1})
    assert json.loads(target.read_text()) == {"good": 1}

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "half")
    assert json.loads(target.read_text()) == {"good": 1}  # the good file survives
    assert sorted(p.name for p in target.parent.iterdir()) == ["summary.json"]  # no temp left behind


def test_unserializable_rows_never_touch_the_file(tmp_path):
    target = tmp_path / "records.jsonl"
    write_jsonl(target, [{"a": 1}])
    with pytest.raises(TypeError):
        write_jsonl(target, [{"a": object()}])
    assert target.read_text() == '{"a": 1}\n'

import json

import pytest

from evidential import ConfigError, FusionConfig
from inference.config import CONFIG_DIR, RunConfig, apply_overrides, load_config, to_dict


def test_defaults_are_the_paper_fusion_setting():
    cfg = load_config()
    assert (cfg.fusion.lam, cfg.fusion.tau1, cfg.fusion.tau2, cfg.fusion.rule, cfg.fusion.policy) == (
        0.6,
        0.35,
        0.65,
        "lambda",
        "paper",
    )
    assert cfg.k == 10


def test_paper_yaml_holds_table14():
    cfg = load_config("paper")
    assert cfg == load_config(CONFIG_DIR / "paper.yaml")
    assert cfg.k == 5 and cfg.fusion.lam == 0.6 and (cfg.fusion.tau1, cfg.fusion.tau2) == (0.35, 0.65)
    assert (
        cfg.models.embedder == "BAAI/bge-large-en-v1.5" and cfg.models.reranker == "BAAI/bge-reranker-v2-m3"
    )
    assert "Llama-3-8B-Instruct" in cfg.evaluator.backend.model and cfg.evaluator.backend.name == "vllm"


def test_cpu_yaml_equals_the_embedded_defaults():
    assert load_config("cpu") == RunConfig()


def test_overrides_are_typed_yaml_scalars():
    cfg = load_config("paper", ["fusion.lam=0.25", "fusion.rule=yager", "k=3", "models.reranker=null"])
    assert (
        cfg.fusion.lam == 0.25 and cfg.fusion.rule == "yager" and cfg.k == 3 and cfg.models.reranker is None
    )
    assert isinstance(load_config(None, ["fusion.lam=1"]).fusion.lam, float)


@pytest.mark.parametrize(
    "override, field",
    [
        ("fusion.lam=1.5", "fusion.lam"),
        ("fusion.lam=abc", "fusion.lam"),
        ("fusion.tau1=0.7", "fusion.tau1"),
        ("fusion.tau2=0.3", "fusion.tau2"),
        ("fusion.rule=mean", "fusion.rule"),
        ("fusion.policy=oracle", "fusion.policy"),
        ("fusion.nope=1", "fusion.nope"),
        ("k=0", "k"),
        ("k=2.5", "k"),
        ("evidence.strength=0", "evidence.strength"),
        ("models.evaluator=", "models.evaluator"),
        ("fusion=3", "fusion"),
    ],
)
def test_bad_values_fail_at_load_naming_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(None, [override])


def test_bad_override_syntax_and_files(tmp_path):
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["fusion.lam"])
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("fusion: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)
    bad.write_text("fusion:\n  tau1: 0.9\n")
    with pytest.raises(ConfigError, match="fusion.tau1"):
        load_config(bad)


def test_apply_overrides_does_not_mutate_its_input():
    data = {"fusion": {"lam": 0.6}}
    out = apply_overrides(data, ["fusion.lam=0.1", "a.b.c=2"])
    assert data == {"fusion": {"lam": 0.6}} and out == {"fusion": {"lam": 0.1}, "a": {"b": {"c": 2}}}


def _flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict) and k != "json_schema":
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}={json.dumps(v)}"


def test_fusion_config_help_and_every_field_round_trips_through_set():
    assert set(FusionConfig.help()) == {
        "lam",
        "rule",
        "tau1",
        "tau2",
        "policy",
        "state_ratio",
        "state_ratio_yes_no",
        "state_witness_ratio",
        "copy_overlap",
        "sanitize",
    }
    assert all(FusionConfig.help().values())
    cfg = load_config("paper")
    assert load_config(None, list(_flatten(to_dict(cfg)))) == cfg
    assert load_config(None, ["fusion.state_witness_ratio=0.4"]).fusion.state_witness_ratio == 0.4
    with pytest.raises(ConfigError, match=r"fusion\.state_witness_ratio must lie in \[0, 1\] or null"):
        load_config(None, ["fusion.state_witness_ratio=2"])

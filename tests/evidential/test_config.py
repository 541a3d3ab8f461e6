"""check_fields: constraints declared in field metadata, validated in one place with messages naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from evidential import ConfigError, FusionConfig
from evidential.config import check_fields, is_int
from evidential.registry import Registry

NAMES: Registry[object] = Registry("thing")
NAMES.register("a")(object())
NAMES.register("b")(object())


@dataclass
class Example:
    count: int = field(default=1, metadata={"help": "h", "range": (1, None)})
    share: float = field(default=0.5, metadata={"help": "h", "range": (0.0, 1.0), "ends": "[)"})
    scale: float = field(default=2, metadata={"help": "h", "range": (0.0, None), "ends": "()"})
    level: int = field(default=5, metadata={"help": "h", "range": (1, 10)})
    kind: str = field(default="x", metadata={"help": "h", "choices": ("x", "y")})
    thing: str = field(default="a", metadata={"help": "h", "choices": NAMES})
    limit: int | None = field(default=None, metadata={"help": "h", "range": (1, None), "null": "all"})
    flag: bool = field(default=False, metadata={"help": "h"})
    label: str = field(default="n", metadata={"help": "h"})
    blank: str | None = field(default="", metadata={"help": "h", "allow_empty": True})
    depth: int = field(default=8, metadata={"help": "h", "range": (8, None), "note": "why 8"})
    even: int = field(default=2, metadata={"help": "h", "check": lambda v: v % 2 == 0, "must": "be even"})

    def __post_init__(self) -> None:
        check_fields(self, "sec")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 0}, "sec.count must be an integer >= 1; got 0"),
        ({"count": True}, "sec.count must be an integer >= 1; got True"),
        ({"count": 2.0}, "sec.count must be an integer >= 1; got 2.0"),
        ({"share": 1.0}, "sec.share must lie in [0, 1); got 1.0"),
        ({"share": "0.5"}, "sec.share must lie in [0, 1); got '0.5'"),
        ({"scale": 0}, "sec.scale must be a number > 0; got 0"),
        ({"scale": float("inf")}, "sec.scale must be a number > 0; got inf"),
        ({"scale": float("nan")}, "sec.scale must be a number > 0; got nan"),
        ({"level": 11}, "sec.level must be an integer from 1 to 10; got 11"),
        ({"kind": "z"}, "sec.kind must be one of x, y; got 'z'"),
        ({"thing": "c"}, "sec.thing must be one of a, b; got 'c'"),
        ({"thing": ["a"]}, "sec.thing must be one of a, b; got ['a']"),
        ({"limit": 0}, "sec.limit must be an integer >= 1 or null (all); got 0"),
        ({"flag": "yes"}, "sec.flag must be true or false; got 'yes'"),
        ({"label": " "}, "sec.label must be a non-empty string; got ' '"),
        ({"label": None}, "sec.label must be a non-empty string; got None"),
        ({"blank": 3}, "sec.blank must be a string or null; got 3"),
        ({"depth": 4}, "sec.depth must be an integer >= 8 (why 8); got 4"),
        ({"even": 3}, "sec.even must be even; got 3"),
    ],
)
def test_declared_constraints_fail_with_the_derived_message(kwargs, message):
    with pytest.raises(ConfigError) as err:
        Example(**kwargs)
    assert str(err.value) == message


def test_valid_values_pass_and_floats_are_stored_as_float():
    ex = Example(share=0, scale=3, limit=None, blank="", thing="b")
    assert (ex.share, ex.scale, ex.blank, ex.thing) == (0.0, 3.0, "", "b")
    assert isinstance(ex.share, float) and isinstance(ex.scale, float)
    assert Example(limit=7, level=10, even=4).limit == 7


def test_top_level_fields_have_no_prefix():
    @dataclass
    class Top:
        k: int = field(default=1, metadata={"help": "h", "range": (1, None)})

        def __post_init__(self) -> None:
            check_fields(self)

    with pytest.raises(ConfigError, match=r"^k must be an integer >= 1; got 0$"):
        Top(k=0)


def test_is_int():
    assert is_int(3) and is_int(0) and not is_int(True) and not is_int(3.0) and not is_int("3")


def test_fusion_config_declares_its_constraints():
    meta = {f: m for f, m in ((f.name, f.metadata) for f in FusionConfig.__dataclass_fields__.values())}
    assert meta["lam"]["range"] == (0.0, 1.0)
    with pytest.raises(ConfigError) as err:
        FusionConfig(lam="abc")
    assert str(err.value) == "fusion.lam must lie in [0, 1]; got 'abc'"
    with pytest.raises(ConfigError) as err:
        FusionConfig(rule="mean")
    assert str(err.value) == "fusion.rule must be one of lambda, yager, dempster, average; got 'mean'"
    with pytest.raises(ConfigError) as err:
        FusionConfig(tau1=0.7, tau2=0.3)
    assert str(err.value) == (
        "fusion.tau1 and fusion.tau2 must satisfy 0 <= tau1 < tau2 <= 1; got tau1=0.7, tau2=0.3"
    )
    assert FusionConfig(lam=1, tau1=0, tau2=1).lam == 1.0 and isinstance(FusionConfig(lam=1).lam, float)

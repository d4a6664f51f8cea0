"""The Scoreboard's results folder (finspace.scoreboard.store): atomic files named by date, model and set, a bound
on their number, and a board that skips a corrupt file with a note instead of breaking."""

from __future__ import annotations

import json

import pytest

from finspace.errors import BadInput
from finspace.scoreboard.store import ScoreStore, file_name


def result(at: float, model: str = "demo", set_name: str = "finqa", score: float = 0.25, **extra) -> dict:
    return {
        "v": 1,
        "at": at,
        "date": "2026-12-01T12:00:00Z",
        "model_key": model,
        "repo": "local",
        "set": set_name,
        "set_version": "x",
        "n": 4,
        "total": 4,
        "score": score,
        "refusals": 0,
        "errors": 0,
        "partial": False,
        "items": [{"id": f"q{i}", "answer": "1", "extracted": 1.0, "correct": i == 0} for i in range(4)],
        **extra,
    }


def test_a_result_is_written_whole_and_read_back_as_the_boards_summary(tmp_path):
    store = ScoreStore(tmp_path / "scores")
    path = store.write(result(1_764_590_400.5, model="smollm2-135m"))
    assert path.name == "20251201T120000.500Z-smollm2-135m-finqa.json"  # sorted by name is sorted by date
    assert path.name == file_name(result(1_764_590_400.5, model="smollm2-135m"))
    assert json.loads(path.read_text())["items"][0]["id"] == "q0"
    assert [p.name for p in (tmp_path / "scores").iterdir()] == [path.name]  # no temporary file left
    found, notes = store.results()
    assert notes == [] and len(found) == 1
    assert found[0]["model_key"] == "smollm2-135m" and found[0]["score"] == 0.25 and found[0]["file"] == path.name
    assert "items" not in found[0]  # the board reads summaries
    assert store.load(path.name)["items"][3]["id"] == "q3"


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "not valid JSON"),
        ('{"model_key": "demo", "set": "finqa", "n": 4, "score": 7, "date": "d", "items": []}', "not in [0, 1]"),
        ('["a list"]', "not a JSON object"),
        ('{"model_key": "demo", "n": 4, "score": 0.5, "date": "d", "items": []}', "'set' is missing"),
        ("\xff\xfe", "not valid JSON"),
    ],
)
def test_a_corrupt_file_is_skipped_with_a_note_and_the_rest_still_listed(tmp_path, text, why):
    store = ScoreStore(tmp_path)
    good = store.write(result(1_000.0))
    (tmp_path / "20990101T000000000-bad-finqa.json").write_bytes(
        text.encode("utf-8", "surrogateescape") if text != "\xff\xfe" else b"\xff\xfe\x00"
    )
    found, notes = store.results()
    assert [r["file"] for r in found] == [good.name]
    assert len(notes) == 1 and "20990101T000000000-bad-finqa.json: skipped" in notes[0] and why in notes[0], notes
    with pytest.raises(BadInput, match="remove it"):
        store.load("20990101T000000000-bad-finqa.json")


def test_the_folder_keeps_the_newest_results_up_to_its_bound(tmp_path):
    store = ScoreStore(tmp_path, max_results=3)
    names = [store.write(result(1_000.0 + i)).name for i in range(5)]
    assert sorted(p.name for p in tmp_path.iterdir()) == names[2:]
    found, _ = store.results()
    assert [r["file"] for r in found] == names[2:]


@pytest.mark.parametrize(
    "name", ["../loads.jsonl", "/etc/passwd", "a/b.json", "..json", "x.txt", "", 7, "nothere.json"]
)
def test_load_takes_only_a_listed_file_name(tmp_path, name):
    store = ScoreStore(tmp_path)
    store.write(result(1_000.0))
    with pytest.raises(BadInput) as err:
        store.load(name)
    assert "/scores" in str(err.value) and str(tmp_path) not in str(err.value)


def test_a_file_changed_on_disk_is_read_again(tmp_path):
    store = ScoreStore(tmp_path)
    path = store.write(result(1_000.0, score=0.25))
    assert store.results()[0][0]["score"] == 0.25
    data = json.loads(path.read_text())
    data["score"] = 0.5
    data["pad"] = "x"  # a different size, so the change is seen whatever the clock's resolution
    path.write_text(json.dumps(data))
    assert store.results()[0][0]["score"] == 0.5

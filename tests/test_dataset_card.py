"""Pool set folders carry a dataset card: `datasets.load_dataset(folder, table)` reads the tables."""
from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
import yaml

from mmbench.data.dataset_card import CARD, card_text, source_licences
from mmbench.data.poolset import load_poolset

datasets = pytest.importorskip("datasets")


def _front_matter(path):
    text = path.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_load_dataset_gives_the_three_tables(vg_tiny, tmp_path):
    manifest = json.loads((vg_tiny / "manifest.json").read_text())
    for table in ("queries", "candidates", "pools"):
        ds = datasets.load_dataset(str(vg_tiny), table, split="test", cache_dir=str(tmp_path / "hf"))
        assert ds.to_list() == pq.read_table(vg_tiny / f"{table}.parquet").to_pylist()
        assert len(ds) == manifest["counts"][table]


def test_load_dataset_without_a_config_gives_the_documents(vg_tiny, tmp_path):
    """The plain call loads the `default` config: queries and candidates as splits (never an ImageFolder)."""
    docs = datasets.load_dataset(str(vg_tiny), cache_dir=str(tmp_path / "hf"))
    assert sorted(docs) == ["candidates", "queries"]
    for table in ("queries", "candidates"):
        assert docs[table].to_list() == pq.read_table(vg_tiny / f"{table}.parquet").to_pylist()
    assert list(docs["queries"].features) == ["id", "segments", "tokens", "meta"]
    assert "documents = datasets.load_dataset(" in (vg_tiny / CARD).read_text()   # the card says so


def test_one_config_cannot_hold_tables_of_different_columns(vg_tiny, tmp_path):
    """Why pools is not a split of the default config: `datasets` refuses it (checked, not assumed)."""
    folder = tmp_path / "mixed"
    shutil.copytree(vg_tiny, folder)
    front = _front_matter(folder / CARD)
    front["configs"] = [{"config_name": "default", "data_files": [{"split": t, "path": f"{t}.parquet"}
                                                                  for t in ("queries", "pools")]}]
    (folder / CARD).write_text("---\n" + yaml.safe_dump(front) + "---\n")
    with pytest.raises(Exception, match="generating the dataset|cast"):
        datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf"))


def test_card_states_hash_and_licences_and_leaves_the_hash_alone(vg_tiny, tmp_path):
    manifest = json.loads((vg_tiny / "manifest.json").read_text())
    front = _front_matter(vg_tiny / CARD)
    assert front["mmbench"]["content_hash"] == manifest["content_hash"]
    assert [c["config_name"] for c in front["configs"]] == ["default", "queries", "candidates", "pools"]
    assert front["mmbench"]["source_licences"] == {"haystack": "psf-2.0", "needles": "apache-2.0"}
    assert front["license"] == "other"
    assert (vg_tiny / CARD).read_text() == card_text(manifest)   # a function of the manifest alone
    ps = load_poolset(vg_tiny, verify=True)                      # the card breaks no integrity check
    assert ps.content_hash == manifest["content_hash"]
    copy = tmp_path / "copy"
    shutil.copytree(vg_tiny, copy)
    (copy / CARD).unlink()                                       # and is not what the hash covers
    assert load_poolset(copy, verify=True).content_hash == manifest["content_hash"]


def test_source_licences():
    manifest = {"sources": {"hotpotqa": "hotpot_dev.json sha256:0123", "mmdocrag": "dev.jsonl sha256:ab",
                            "filler": "pydoc_data.topics (Python Language Reference)", "unused_one": "unused",
                            "queries": "hf:org/set@0123abcd split=test license=mit rows=10"}}
    assert source_licences(manifest) == {"filler": "psf-2.0", "hotpotqa": "cc-by-sa-4.0", "mmdocrag": "unknown",
                                         "queries": "mit"}
    card = card_text({**manifest, "task": "t", "task_version": "1", "content_hash": "ab" * 32})
    assert yaml.safe_load(card.split("---\n")[1])["license"] == "unknown"


def test_export_card_adds_the_card_to_an_older_pool_set(vg_tiny, tmp_path, capsys):
    from mmbench.cli import main

    old = tmp_path / "old"
    shutil.copytree(vg_tiny, old)
    (old / CARD).unlink()                                        # as built before cards existed
    assert main(["export", "--format", "card", str(old)]) == 0
    assert (old / CARD).read_text() == (vg_tiny / CARD).read_text()
    assert main(["export", "--format", "card", str(old)]) == 0   # rewriting our own card is fine
    (old / CARD).write_text("# my notes\n")
    assert main(["export", "--format", "card", str(old)]) == 2   # someone else's README is left alone
    assert "is not an mmbench dataset card" in capsys.readouterr().err
    assert (old / CARD).read_text() == "# my notes\n"
    assert main(["export", "--format", "mteb", str(old)]) == 2   # mteb needs --out

"""`mmbench ravel` end to end offline: tiny random vision encoders + tiny random LLM from configs."""
import json

import numpy as np
import pandas as pd
import pytest

from mmbench.builders.sources import calibration_pairs, shapes_sample
from mmbench.cli import main as mmbench_main
from mmbench.data import calibration
from mmbench.models.llm_text import TextModel
from mmbench.models.patch_encoder import VisionEncoder
from mmbench.models.ravel_tiny import build_tiny_models
from mmbench.running import ravel_features as features


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


def test_features_patch_tokens_exclude_special_tokens(models, tmp_path):
    cal = calibration.sample_pairs(shapes_sample.load_sample(100), 6, 42, "sample")
    cache = tmp_path / "cache"
    for name in ("clip", "siglip", "dinov2reg"):  # CLS+16, 16, CLS+2 registers+16 tokens
        enc = VisionEncoder(models[name])
        x = features.extract_visual(enc, cal, cache_root=cache)
        assert x.shape == (6, 16, 32)
        # equals the last 16 tokens of the model's own output (special tokens dropped)
        import torch
        with torch.no_grad():
            full = enc.model(pixel_values=enc.preprocess([calibration_pairs.load_image(p) for p in cal.pairs])).last_hidden_state
        np.testing.assert_allclose(x, full[:, -16:].numpy(), atol=1e-6)
        enc.patch_tokens = None  # a cache hit never runs the model
        assert np.array_equal(features.extract_visual(enc, cal, cache_root=cache), x)
    assert len(list(cache.glob(f"*/{features.VISUAL_ROLE}/packs/*.npz"))) == 3  # one model key per encoder
    tm = TextModel(models["llm"])
    t = features.extract_text(tm, cal, cache_root=cache)
    assert t.shape == (6, 32)
    # mean over real tokens of hidden_states[-2], independent of batch padding
    single = np.concatenate([tm.encode([s]).numpy() for s in cal.texts])
    np.testing.assert_allclose(t, single, atol=1e-5)
    # last-token pooling: the hidden state at each text's own last token, whatever the padding
    last = TextModel(models["llm"], pool="last")
    batch = last.encode(cal.texts).numpy()
    import torch
    for i, text in enumerate(cal.texts):
        ids = last.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            ref = last.model(**ids, output_hidden_states=True).hidden_states[-2][0, -1].float().numpy()
        np.testing.assert_allclose(batch[i], ref, atol=1e-5)
    assert not np.allclose(batch, t)
    t_last = features.extract_text(last, cal, cache_root=cache)  # pooling is part of the feature cache key
    np.testing.assert_allclose(t_last, batch, atol=1e-5)


def test_calibration_sampling_is_seeded_and_recorded(tmp_path):
    pool = shapes_sample.load_sample(500)
    a = calibration.sample_pairs(pool, 50, 42, "sample")
    b = calibration.sample_pairs(pool, 50, 42, "sample")
    assert [p.index for p in a.pairs] == [p.index for p in b.pairs]
    assert [p.index for p in calibration.sample_pairs(pool, 50, 7).pairs] != [p.index for p in a.pairs]
    path = a.write_manifest(tmp_path / "m.jsonl")
    back = calibration.read_manifest(path)
    assert back.pairs == a.pairs and back.fingerprint() == a.fingerprint()
    img = calibration_pairs.load_image(a.pairs[0])
    assert img.size == (224, 224) and a.pairs[0].text.endswith(".")


def test_llava_lcs_and_pairs_sources(tmp_path):
    from PIL import Image

    (tmp_path / "imgs" / "00000").mkdir(parents=True)
    items = []
    for i in range(5):
        rel = f"00000/{i:09d}.jpg"
        Image.new("RGB", (20, 20), (i * 40, 0, 0)).save(tmp_path / "imgs" / rel)
        items.append({"id": f"{i:09d}", "image": rel, "conversations": [
            {"from": "human", "value": "<image>\nDescribe."}, {"from": "gpt", "value": f"caption {i}"}]})
    (tmp_path / "lcs.json").write_text(json.dumps(items))
    pool = calibration_pairs.load_source("llava-lcs", json_path=tmp_path / "lcs.json", image_root=tmp_path / "imgs")
    assert [p.text for p in pool] == [f"caption {i}" for i in range(5)]
    assert calibration_pairs.load_image(pool[2]).getpixel((0, 0))[0] == pytest.approx(80, abs=3)
    pd.DataFrame({"image": [items[0]["image"]], "text": ["hi"]}).to_csv(tmp_path / "p.csv", index=False)
    pp = calibration_pairs.load_source("pairs", pairs_file=tmp_path / "p.csv", image_root=tmp_path / "imgs")
    assert pp[0].text == "hi" and calibration_pairs.load_image(pp[0]).size == (20, 20)


def test_cli_score_sweep_selection_flops_end_to_end(models, tmp_path, capsys):
    man = tmp_path / "cal.jsonl"
    assert mmbench_main(["ravel", "calibrate", "--source", "sample", "--n", "30", "--out", str(man)]) == 0
    out = tmp_path / "scores.csv"
    common = ["--manifest", str(man), "--cache-dir", str(tmp_path / "cache"),
              "--encoder", f"clip={models['clip']}", "--encoder", models["siglip"],
              "--encoder", f"dinov2reg={models['dinov2reg']}", "--llm", f"Qwen3-1.7B={models['llm']}"]
    assert mmbench_main(["ravel", "score", *common, "--k", "5", "--methods", "all", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert list(df["encoder"]) == ["clip", "siglip", "dinov2reg"]
    assert set(df["llm"]) == {"Qwen3-1.7B"}
    for col in ("ravel", "mutualnn", "mutualnn-whiten", "mutualnn-abtt", "rsa", "cca", "cka", "gw", "patch-raw"):
        assert df[col].notna().all(), col
    assert ((df["ravel"] >= 0) & (df["ravel"] <= 1)).all()
    assert out.with_suffix(".manifest.jsonl").exists()
    # arrays as an encoder source give the same RAVEL score
    feats = features.extract_visual(VisionEncoder(models["clip"]), calibration.read_manifest(man))
    np.save(tmp_path / "clip.npy", feats)
    out2 = tmp_path / "scores2.csv"
    assert mmbench_main(["ravel", "score", "--manifest", str(man), "--features", f"clip={tmp_path / 'clip.npy'}",
                     "--llm", f"Qwen3-1.7B={models['llm']}", "--k", "5", "--cache-dir", "", "--out", str(out2)]) == 0
    assert pd.read_csv(out2)["ravel"][0] == pytest.approx(df["ravel"][0])

    sweep = tmp_path / "sweep.csv"
    assert mmbench_main(["ravel", "sweep", *common[:4], "--encoder", f"clip={models['clip']}",
                     "--llm", f"q={models['llm']}", "--k", "5", "--ks", "3,5", "--epss", "1e-4,1e-2",
                     "--ns", "20,30", "--ablation", "--out", str(sweep)]) == 0
    sw = pd.read_csv(sweep)
    assert set(sw["param"]) == {"k", "eps", "n", "ablation"}

    # user ground truth → correlate + selection run on our own scores
    gt = pd.DataFrame({"llm": ["Qwen3-1.7B"] * 3, "encoder": ["clip", "siglip", "dinov2reg"], "Avg": [40.0, 45.0, 30.0]})
    gt.to_csv(tmp_path / "gt.csv", index=False)
    assert mmbench_main(["ravel", "correlate", "--scores", str(out), "--score-column", "ravel",
                     "--ground-truth", str(tmp_path / "gt.csv")]) == 0
    assert "Qwen3-1.7B" in capsys.readouterr().out
    assert mmbench_main(["ravel", "selection", "--scores", str(out), "--ground-truth", str(tmp_path / "gt.csv"),
                     "--out", str(tmp_path / "sel.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "sel.csv")) == 3
    assert mmbench_main(["ravel", "flops", "--n", "30", "--p", "16", "--d-v", "32", "--d-t", "32"]) == 0


def test_cli_ckax_on_arrays(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 60
    lat = rng.normal(size=(n, 6))
    np.save(tmp_path / "text.npy", lat @ rng.normal(size=(6, 12)))
    args, rows = [], []
    for m in range(8):
        a = m / 7
        np.save(tmp_path / f"e{m}.npy", (a * lat @ rng.normal(size=(6, 10)) + (1 - a) * rng.normal(size=(n, 10)))[:, None])
        args += ["--features", f"e{m}={tmp_path / f'e{m}.npy'}"]
        rows.append({"llm": "Qwen3-1.7B", "encoder": f"e{m}", "Avg": 30 + 10 * a})
    pd.DataFrame(rows).to_csv(tmp_path / "gt.csv", index=False)
    assert mmbench_main(["ravel", "ckax", *args, "--text-features", f"Qwen3-1.7B={tmp_path / 'text.npy'}",
                     "--ground-truth", str(tmp_path / "gt.csv"), "--budgets", "4", "--repeats", "5",
                     "--out", str(tmp_path / "ckax.csv")]) == 0
    assert "leave-one-out Spearman" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "ckax.csv")) == 8


def test_registered_in_mmbench_cli(capsys):
    import mmbench.cli as top

    assert "ravel" in top.COMMAND_MODULES and top.COMMANDS["ravel"] == "ravel"
    assert top.main(["ravel", "flops", "--n", "20", "--p", "4"]) == 0
    assert capsys.readouterr().out.strip()


def test_cli_ckax_reports_encoders_without_ground_truth(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n = 40
    lat = rng.normal(size=(n, 4))
    np.save(tmp_path / "text.npy", lat @ rng.normal(size=(4, 8)))
    args, rows = [], []
    for m in range(6):
        np.save(tmp_path / f"e{m}.npy", (lat @ rng.normal(size=(4, 6)) + m * rng.normal(size=(n, 6)))[:, None])
        args += ["--features", f"e{m}={tmp_path / f'e{m}.npy'}"]
        if m < 5:  # e5 (say, a typo in its name) has no label
            rows.append({"llm": "Qwen3-1.7B", "encoder": f"e{m}", "Avg": 40 - m})
    pd.DataFrame(rows).to_csv(tmp_path / "gt.csv", index=False)
    assert mmbench_main(["ravel", "ckax", *args, "--text-features", f"Qwen3-1.7B={tmp_path / 'text.npy'}",
                         "--ground-truth", str(tmp_path / "gt.csv")]) == 0
    err = capsys.readouterr().err
    assert "left out 1 encoder(s)" in err and "e5" in err


def test_llava_items_without_an_image_are_counted_and_named(tmp_path, capsys):
    from PIL import Image

    (tmp_path / "imgs").mkdir()
    items = []
    for i in range(3):
        Image.new("RGB", (8, 8)).save(tmp_path / "imgs" / f"{i}.png")
        conv = [{"from": "human", "value": "?"}, {"from": "gpt", "value": f"c{i}"}]
        items.append({"id": str(i), "conversations": conv} if i == 1 else
                     {"id": str(i), "image": f"{i}.png", "conversations": conv})
    (tmp_path / "l.json").write_text(json.dumps(items))
    assert mmbench_main(["ravel", "calibrate", "--source", "llava-lcs", "--json", str(tmp_path / "l.json"),
                         "--image-root", str(tmp_path / "imgs"), "--n", "2", "--out", str(tmp_path / "m.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "skipped 1 of 3 items" in err and "item without an image ×1" in err and "item 1" in err
    assert [p.index for p in calibration.read_manifest(tmp_path / "m.jsonl").pairs] == [0, 2]


def test_feature_cache_encodes_only_items_it_does_not_hold(models, tmp_path):
    pool = shapes_sample.load_sample(40)
    first = calibration.Calibration(pool[:6], "sample", 0, 40)
    second = calibration.Calibration(pool[3:9], "sample", 0, 40)  # 3 shared images and captions, 3 new
    enc, tm = VisionEncoder(models["clip"]), TextModel(models["llm"])
    a = features.extract_visual(enc, first, cache_root=tmp_path)
    ta = features.extract_text(tm, first, cache_root=tmp_path)
    seen: list[int] = []
    run = enc.patch_tokens
    enc.patch_tokens = lambda pixels: (seen.append(len(pixels)), run(pixels))[1]
    b = features.extract_visual(enc, second, cache_root=tmp_path)
    assert seen == [3]  # only the 3 new images went through the model
    assert np.array_equal(b[:3], a[3:])  # the shared ones come back bit for bit
    np.testing.assert_allclose(b[3:], features.extract_visual(VisionEncoder(models["clip"]), second)[3:], atol=1e-6)
    tb = features.extract_text(tm, second, cache_root=tmp_path)
    assert np.array_equal(tb[:3], ta[3:])

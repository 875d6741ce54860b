"""What mmbench does with each seed model, against what its authors' code and mteb's wrapper do.

The mmbench column of a Qwen-VL-family model is computed from its preset (the adapter's own settings),
so it cannot drift from what runs; the authors' and mteb's columns are claims read from their code, each
with its source. `mmbench list models --details` prints the table and docs/models.md carries it
(tests/test_protocol_table.py checks both against the presets, and GME's `--protocol mteb` against the
mteb column).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mmbench.models import api_doubao, e5v
from mmbench.models.qwen_vl import POSITIONS, QwenVLPreset, with_protocol
from mmbench.models.qwen_vl_presets import PRESETS

ASPECTS = ("instruction", "image tokens", "max length", "video", "positions", "pooling", "normalisation")
POSITION_WORDS = {"mrope": "3-D M-RoPE", "sequential": "1-D (sequential)"}
assert set(POSITION_WORDS) == set(POSITIONS)


@dataclass(frozen=True)
class Claim:
    """One aspect as the authors' code and mteb's wrapper run it; `difference` says why mmbench departs, if it does."""

    authors: str
    mteb: str
    difference: str = ""


@dataclass(frozen=True)
class Reference:
    """A seed model's sources and its claims per aspect."""

    presets: tuple[str, ...]
    authors_source: str
    mteb_source: str
    claims: dict[str, Claim]
    column: Callable[[], dict[str, str]] | None = None  # mmbench's column for a model outside the Qwen-VL presets


def image_tokens(preset: QwenVLPreset) -> str:
    vb = preset.vision
    f2 = vb.factor * vb.factor
    by = "; the processor resizes" if preset.image_resize == "processor" else ""
    return f"{vb.min_pixels // f2}–{vb.max_pixels // f2} (factor {vb.factor}){by}"


def max_length(preset: QwenVLPreset) -> str:
    if preset.max_length:
        return f"{preset.max_length} tokens, cut at the right by the tokenizer (closing tokens included)"
    return f"{preset.context}-token window; documents middle-cut before the prompt (closing tokens kept)"


def video(preset: QwenVLPreset) -> str:
    if not preset.video:
        return "off"
    vb = preset.vision
    rate = f"{vb.fps:g} fps (every k-th frame)" if vb.fps else "the pool set's frames"
    if preset.num_frames:
        rate = f"{preset.num_frames} frames evenly spaced (a shorter clip's repeated in place, counted)"
    if preset.frame_stamp_fps:
        rate += f"; timestamps at {preset.frame_stamp_fps:g} fps"
    if preset.video_frames_as_images:
        f2 = vb.factor * vb.factor
        return f"frames as images, {vb.video_min_pixels // f2}–{vb.video_max_pixels // f2} tokens each; {rate}"
    return f"native video, {rate}; an odd frame count padded by repeating the last frame (counted)"


def mmbench_column(preset: QwenVLPreset) -> dict[str, str]:
    """The preset's protocol in the table's words (what the adapter runs)."""
    tpl = preset.template
    doc = tpl.document_instruction if isinstance(tpl.document_instruction, str) else dict(tpl.document_instruction)
    where = ("plain text, no chat markup" if tpl.style == "plain" else
             "user turn, after leading visuals; fixed system prompt" if tpl.instruction_in_user else "system turn")
    if tpl.style == "chat" and not tpl.single_visual_first:
        where += "; the user turn in reading order (a text ahead of its one visual stays first)"
    return {
        "instruction": f"{where}; query {tpl.query_instruction!r}; document {doc!r}",
        "image tokens": image_tokens(preset),
        "max length": max_length(preset),
        "video": video(preset),
        "positions": POSITION_WORDS[preset.positions],
        "pooling": "last attended token, final norm",
        "normalisation": "L2",
    }


GME_AUTHORS = ("huggingface.co/Alibaba-NLP/gme-Qwen2-VL-2B-Instruct: gme_inference.py and modeling_gme_qwen2vl.py "
               "(transformers < 4.52)")
QWEN3_AUTHORS = "huggingface.co/Qwen/Qwen3-VL-Embedding-2B: scripts/qwen3_vl_embedding.py"
MTEB = "mteb 2.26, mteb/models/model_implementations/"
POOL = Claim("last attended token, final norm", "last attended token, final norm")
L2 = Claim("L2", "L2")

REFERENCES: dict[str, Reference] = {
    "gme": Reference(("gme-2b", "gme-7b"), GME_AUTHORS, MTEB + "gme_v_models.py", {
        "instruction": Claim("system turn; task instruction for queries, 'You are a helpful assistant.' for documents; "
                             "image before text; ends <|endoftext|>",
                             "as the authors; a '.' appended to a query instruction not ending in '.'"),
        "image tokens": Claim("256–1280 (factor 28); resized twice: qwen-vl-utils' grid (4–16384 tokens), then the "
                              "processor's bounds",
                              "4–1280 (factor 28); resized twice, as the authors",
                              "mmbench resizes once (PIL bicubic) to the bounds: equal for images on the 28-px grid "
                              "within them; --protocol mteb takes mteb's 4-token minimum"),
        "max length": Claim("1800 tokens, cut at the right by the tokenizer (closing tokens included)",
                            "1800 tokens, cut at the right by the tokenizer (closing tokens included)",
                            "MMLongEmbed reads long documents whole: the 1800-token cut would keep the first 1800 "
                            "tokens of a 32K document and pool a content token (--protocol mteb applies it)"),
        "video": Claim("none (one image per input)", "none (text and image only)",
                       "video off by default; several images per document in reading order (no reference form)"),
        "positions": Claim("1-D (sequential): the text decoder is called with position_ids=None",
                           "1-D (sequential), as the authors",
                           "positions=mrope selects the backbone's 3-D M-RoPE (another setup)"),
        "pooling": POOL, "normalisation": L2,
    }),
    "qwen3-vl-embedding": Reference(("qwen3-vl-embedding-2b", "qwen3-vl-embedding-8b"), QWEN3_AUTHORS,
                                    MTEB + "qwen3_vl_embedding_models.py", {
        "instruction": Claim("system turn; '.' appended unless it ends in punctuation; default 'Represent the "
                             "user's input.'; the user turn holds videos, then images, then the text",
                             "as the authors (the task's instruction or the default); the user turn in the dataset's "
                             "column order (sentence-transformers), so a text column ahead of the image puts the "
                             "text first",
                             "several visuals amid text stay in reading order (the authors put every visual first); "
                             "--protocol mteb keeps a text ahead of its one visual first, as mteb's column order does"),
        "image tokens": Claim("4–1800 (factor 32); qwen-vl-utils resizes (PIL bicubic), the processor does not",
                              "4–1800 (factor 32); the processor resizes (torchvision under transformers 5: a "
                              "resized image's vector moves by under 1e-5 in cosine on tiny weights); --protocol "
                              "mteb lets the processor resize, as mteb does"),
        "max length": Claim("8192 tokens", "8192 tokens, cut at the right by the tokenizer (closing tokens included); "
                            "sentence-transformers",
                            "MMLongEmbed uses the 32768-token window (model card: 32K context); --protocol mteb cuts "
                            "at 8192"),
        "video": Claim("1 fps, at most 64 frames, a total pixel budget; frames padded to an even count by "
                       "repeating the last", "1 fps, 4–64 frames, padded to an even count by repeating the last; "
                       "under transformers 5.24 the text before the video, frames stamped at an assumed 24 fps and "
                       "the vision markup doubled (tests/test_models_qwen3vl_parity.py)",
                       "no total pixel budget (the window bounds it) and no 4-frame minimum; padding counted. "
                       "--protocol mteb: text before the video in reading order, timestamps at 24 fps, the markup "
                       "doubled (equal for 1-fps clips up to 64 frames on the grid); mteb's 64-frame cap, its "
                       "evenly spaced sampling of faster clips (at least 4 frames), its total pixel budget (frames of "
                       "clips over 20 frames shrink) and its torchvision frame resizing are not applied"),
        "positions": Claim("3-D M-RoPE (the model's own forward)", "3-D M-RoPE"),
        "pooling": POOL, "normalisation": L2,
    }),
    "vlm2vec": Reference(("vlm2vec-2b", "vlm2vec-v2"), "github.com/TIGER-AI-Lab/VLM2Vec: src/model/processor.py, "
                         "experiments/public/eval", MTEB + "vlm2vec_models.py (V2.0 only; V1 there is Phi-3.5-V)", {
        "instruction": Claim("'<|image_pad|> ' + instruction + ' ' + text, no chat markup",
                             "V2: the same, with per-task instructions",
                             "mmbench's default instructions are MMEB's text-to-image ones; --protocol mteb takes "
                             "mteb's document-image retrieval ones (VisRAG, ViDoRe) and its video-retrieval document "
                             "one for a video"),
        "image tokens": Claim("V1: UNVERIFIED (Qwen2-VL processor defaults assumed); V2: 4–1280 (checkpoint's "
                              "processor config); the processor resizes",
                              "V2: the checkpoint's processor (max 1003520 px = 1280 tokens), which resizes "
                              "(torchvision under transformers 5)",
                              "V1 (vlm2vec-2b): the Qwen2-VL processor's defaults 4–16384, kept UNVERIFIED (V1's "
                              "training bounds were not found in its published code); V2 takes its checkpoint's. "
                              "mmbench resizes with PIL bicubic, as transformers' PIL image processor does (pixel for "
                              "pixel); the torchvision one moves a resized image's vector by under 1e-5 in cosine on "
                              "tiny weights; --protocol mteb lets the processor resize, as mteb does"),
        "max length": Claim("UNVERIFIED (not found in the inference code)", "none",
                            "MMLongEmbed uses the 32768-token window"),
        "video": Claim("V2: 8 frames evenly spaced (eval config)", "V2: 8 frames evenly spaced, a shorter clip's "
                       "repeated in place", "mmbench keeps the pool set's 1-fps frames; --protocol mteb samples 8 as "
                       "mteb does"),
        "positions": Claim("3-D M-RoPE (the generation model's forward)", "V2: 3-D M-RoPE"),
        "pooling": Claim("last token, final hidden state", "V2: last token (left padding)"),
        "normalisation": L2,
    }),
    "ops-mm": Reference(("ops-mm-embedding-2b", "ops-mm-embedding-7b"), "not checked (no inference code read)",
                        MTEB + "ops_mm_models.py", {
        "instruction": Claim("not checked", "system turn = instruction, 'You are a helpful assistant.' otherwise; "
                             "images first; ends <|endoftext|>"),
        "image tokens": Claim("not checked", "256–1280 (factor 28)"),
        "max length": Claim("not checked", "none", "MMLongEmbed uses the 32768-token window"),
        "video": Claim("not checked", "8 frames evenly spaced, as images", "mmbench keeps the pool set's 1-fps frames"),
        "positions": Claim("not checked", "3-D M-RoPE (the generation model's forward)"),
        "pooling": Claim("not checked", "last position (left padding), final norm"), "normalisation": L2,
    }),
    "rzen-embed": Reference(("rzen-embed",), "github.com/360CVGroup/RzenEmbed: rzen_embed_inference.py (the GME "
                            "recipe, transformers 4 layout)", MTEB + "rzen_embed_model.py", {
        "instruction": Claim("fixed system prompt; the instruction prefixes the text with nothing between (its "
                             "example query instruction ends in a space); its example gives image candidates "
                             "'Represent the given image.'",
                             "fixed system prompt; instruction opens the user turn after the images, joined to the "
                             "text with nothing",
                             "mmbench puts one space after the instruction (the authors' example's own space) and "
                             "gives documents no instruction (document_instruction sets one)"),
        "image tokens": Claim("256–1280 (factor 28); video frames 160–180; resized twice (qwen-vl-utils' grid, then "
                              "the processor)", "256–1280 (factor 28); video frames 160–180",
                              "mmbench resizes once (PIL bicubic): equal for images on the grid within the bounds"),
        "max length": Claim("2000 tokens, cut at the right by the tokenizer", "2000 tokens, cut at the right by the "
                            "tokenizer", "MMLongEmbed uses the 32768-token window"),
        "video": Claim("frames as images (the caller's frames)", "8 frames evenly spaced, as images",
                       "mmbench keeps the pool set's 1-fps frames"),
        "positions": Claim("1-D (sequential): the text decoder is called with position_ids=None",
                           "1-D (sequential): the decoder is called with inputs_embeds only"),
        "pooling": POOL, "normalisation": L2,
    }),
}


def e5v_column() -> dict[str, str]:
    """E5-V's protocol in the table's words, from the adapter's constants."""
    return {"instruction": f"none; one-word summary prompts: text {e5v.TEXT_SUFFIX!r}, image {e5v.IMAGE_SUFFIX!r}, "
                           f"text with images {e5v.MIXED_SUFFIX!r}",
            "image tokens": "LLaVA-NeXT any-resolution tiling (the processor's)",
            "max length": f"{e5v.WINDOW}-token window; documents middle-cut before the prompt",
            "video": "frames as images", "positions": "1-D (Llama-3)",
            "pooling": "last attended position, final hidden state", "normalisation": "L2"}


def doubao_column() -> dict[str, str]:
    """Doubao-Seed-1.6's protocol in the table's words, from the adapter's constants."""
    return {"instruction": "none by default (query_prefix / document_prefix)",
            "image tokens": f"the service's; sides {api_doubao.MIN_SIDE}–{api_doubao.MAX_SIDE} px, aspect at most "
                            f"1:{api_doubao.MAX_ASPECT:g} (refused otherwise)",
            "max length": f"{api_doubao.WINDOW}-token window (Qwen3 tokenizer stand-in); documents middle-cut",
            "video": "1-fps frames as image parts", "positions": "the service's",
            "pooling": "the service's", "normalisation": "L2"}


REFERENCES.update({
    "e5-v": Reference(("e5-v",), "huggingface.co/royokong/e5-v (model card)", MTEB + "e5_v.py", {
        "instruction": Claim("text and image prompts as mmbench's; none for text with images",
                             "text and image prompts as mmbench's; text with an image: a composed-retrieval prompt "
                             "('Modify this image with ...')",
                             "text with images: mmbench's own summary prompt (no reference has one for documents)"),
        "image tokens": Claim("LLaVA-NeXT any-resolution tiling (the processor's)",
                              "LLaVA-NeXT any-resolution tiling (the processor's)"),
        "max length": Claim("not stated", "none", "MMLongEmbed uses the Llama-3 backbone's 8192-token window"),
        "video": Claim("none", "none", "mmbench gives frames as images"),
        "positions": Claim("1-D (Llama-3)", "1-D (Llama-3)"),
        "pooling": Claim("last position, final hidden state", "last position, final hidden state (left padding)"),
        "normalisation": Claim("L2 (model card example)", "none (cosine similarity normalises)"),
    }, column=e5v_column),
    "doubao-seed-1.6": Reference(("doubao-seed-1.6-embedding",), "volcengine.com/docs/82379/1409290 (Ark API)",
                                 MTEB + "seed_1_6_embedding_models.py", {
        "instruction": Claim("not stated", "per-task instructions around the text",
                             "mmbench's tasks are not mteb's: no instruction unless set"),
        "image tokens": Claim("the service's; sides 10–6000 px, aspect at most 1:100 (refused otherwise)",
                              "the service's"),
        "max length": Claim("128K (the seed's stated window)", "32000 tiktoken tokens, head kept",
                            "MMLongEmbed reads up to the stated 128K window, middle-cut"),
        "video": Claim("video_url files", "not sent", "pool sets store frames, sent as image parts"),
        "positions": Claim("the service's", "the service's"),
        "pooling": Claim("the service's", "the service's"),
        "normalisation": Claim("not stated", "L2"),
    }, column=doubao_column),
})


def rows(family: str, protocol: str | None = None) -> list[tuple[str, str, str, str, str]]:
    """(aspect, mmbench, authors, mteb, difference) for a family, mmbench's column from its first preset."""
    ref = REFERENCES[family]
    ours = ref.column() if ref.column else mmbench_column(with_protocol(PRESETS[ref.presets[0]], protocol))
    return [(a, ours[a], ref.claims[a].authors, ref.claims[a].mteb, ref.claims[a].difference) for a in ASPECTS]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The protocol-differences tables of docs/models.md."""
    out: list[str] = []
    for family, ref in REFERENCES.items():
        out += [f"#### {', '.join(ref.presets)}", "",
                f"Authors: {ref.authors_source}. mteb: {ref.mteb_source}.", "",
                "| aspect | mmbench | authors | mteb | why mmbench differs |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows(family)]
        out.append("")
    return "\n".join(out)


def details(name: str) -> list[str]:
    """`mmbench list models --details` lines for one registered model ([] when no table covers it)."""
    family = next((f for f, ref in REFERENCES.items() if name in ref.presets), None)
    if family is None:
        return []
    ref = REFERENCES[family]
    lines = [f"authors: {ref.authors_source}", f"mteb: {ref.mteb_source}"]
    for aspect, ours, authors, mteb, why in rows(family):
        lines.append(f"{aspect}: mmbench {ours} | authors {authors} | mteb {mteb}" + (f" | differs: {why}" if why else ""))
    for name_, changes in sorted(PRESETS[name].protocols.items() if name in PRESETS else ()):
        lines.append(f"--protocol {name_}: " + "; ".join(f"{a} {v}" for a, v in
                                                          mmbench_column(with_protocol(PRESETS[name], name_)).items()
                                                          if v != mmbench_column(PRESETS[name])[a]))
    return lines


# Vector parity per input kind: each seed model's adapter against an independent implementation on tiny random
# weights (or, for the API model, the request body). "equal" names the test that checks it (1e-5); otherwise the
# cell states the difference and its cause. tests/test_protocol_table.py checks every family has every kind and
# that each named test exists.
INPUT_KINDS = ("text query", "image", "image with text", "interleaved", "video frames", "long document")
GME_T = "tests/test_models_gme_parity.py::"
Q3_T = "tests/test_models_qwen3vl_parity.py::"
V2V_T = "tests/test_models_vlm2vec_parity.py::"
QVL_T = "tests/test_models_qwen_vl_parity.py::"
E5V_T = "tests/test_models_e5v.py::"
SEED_T = "tests/test_api_doubao.py::"


@dataclass(frozen=True)
class Parity:
    """One input kind of one seed model: `test` when the vectors are equal, else `difference` (with its cause)."""

    test: str = ""
    difference: str = ""


PARITY: dict[str, dict[str, Parity]] = {
    "gme": {
        "text query": Parity(GME_T + "test_default_gives_the_recipes_vectors_on_text_and_image_documents"),
        "image": Parity(GME_T + "test_default_gives_the_recipes_vectors_on_text_and_image_documents"),
        "image with text": Parity(GME_T + "test_default_gives_the_recipes_vectors_on_text_and_image_documents"),
        "interleaved": Parity(GME_T + "test_interleaved_documents_give_the_recipes_vectors"),
        "video frames": Parity(GME_T + "test_video_gives_the_recipes_vectors"),
        "long document": Parity(GME_T + "test_mteb_protocol_gives_mtebs_vectors",
                                "default protocol: read whole, where the authors and mteb cut at 1800 tokens "
                                "(--protocol mteb: equal)"),
    },
    "qwen3-vl-embedding": {
        "text query": Parity(Q3_T + "test_qwen3_vl_embedding_equals_mtebs_wrapper_on_every_input_kind"),
        "image": Parity(Q3_T + "test_qwen3_vl_embedding_equals_mtebs_wrapper_on_every_input_kind"),
        "image with text": Parity(Q3_T + "test_qwen3_vl_embedding_equals_mtebs_wrapper_on_every_input_kind",
                                  "mteb puts a text column ahead of the image first (its dataset's column order); "
                                  "visuals first: equal; --protocol mteb keeps a text ahead of the image first: "
                                  "equal (test_mteb_protocol_gives_mtebs_vectors)"),
        "interleaved": Parity(Q3_T + "test_qwen3_vl_embedding_equals_mtebs_wrapper_on_every_input_kind",
                              "several images then text: equal; images amid text stay in reading order in mmbench, "
                              "where the authors put every visual first (no reference form)"),
        "video frames": Parity(Q3_T + "test_video_differs_from_mtebs_run_by_three_named_causes_only",
                               "mteb's run puts the text before the video, stamps frames at an assumed 24 fps (the "
                               "sampled frames reach the processor without their rate) and doubles the vision "
                               "markup (transformers 5.24); with those three, equal; --protocol mteb applies them: "
                               "equal for a 1-fps clip (test_mteb_protocol_gives_mtebs_vectors)"),
        "long document": Parity(Q3_T + "test_qwen3_vl_embedding_equals_mtebs_wrapper_on_every_input_kind",
                                "equal below 8192 tokens; above, the authors and mteb cut at 8192, mmbench reads "
                                "the 32768-token window (--protocol mteb cuts at 8192 at the right; the cut is "
                                "checked by token count, not by vector)"),
    },
    "vlm2vec": {
        "text query": Parity(V2V_T + "test_vlm2vec_v2_equals_mtebs_wrapper_on_every_input_kind"),
        "image": Parity(V2V_T + "test_vlm2vec_v2_equals_mtebs_wrapper_on_every_input_kind"),
        "image with text": Parity(V2V_T + "test_vlm2vec_v2_equals_mtebs_wrapper_on_every_input_kind"),
        "interleaved": Parity("", "no reference form: VLM2Vec's prompt takes one image; mmbench places several "
                                  "after the instruction in reading order"),
        "video frames": Parity(V2V_T + "test_video_equals_mtebs_on_eight_frames_and_a_short_clip_differs_by_"
                                       "mtebs_repeats",
                               "8 frames: equal; mteb samples 8 frames (repeating a shorter clip's in place), "
                               "mmbench keeps the pool set's frames; --protocol mteb samples as mteb does: equal "
                               "(test_mteb_protocol_gives_mtebs_vectors)"),
        "long document": Parity("", "not compared by vector: neither mteb nor the authors' inference code states a "
                                    "cut, and mmbench reads the 32768-token window (the same prompt as a text)"),
    },
    "ops-mm": {kind: Parity(QVL_T + "test_ops_mm_equals_mtebs_wrapper_on_every_input_kind") for kind in
               ("text query", "image", "image with text", "video frames", "long document")} | {
        "interleaved": Parity(QVL_T + "test_ops_mm_equals_mtebs_wrapper_on_every_input_kind",
                              "several images then text: equal; images amid text stay in reading order in "
                              "mmbench, where mteb puts every image first (no reference form)"),
    },
    "rzen-embed": {
        "text query": Parity(QVL_T + "test_rzen_equals_mtebs_wrapper_and_its_positions_are_the_authors"),
        "image": Parity(QVL_T + "test_rzen_equals_mtebs_wrapper_and_its_positions_are_the_authors"),
        "image with text": Parity(QVL_T + "test_rzen_equals_mtebs_wrapper_and_its_positions_are_the_authors"),
        "interleaved": Parity("", "not compared by vector: the authors' code and mteb's wrapper take one image and "
                                  "one text; mmbench keeps several in reading order"),
        "video frames": Parity("", "not compared by vector: mteb samples 8 frames as images at 160–180 tokens; "
                                   "mmbench gives the pool set's frames the same way (its own frame count)"),
        "long document": Parity(QVL_T + "test_rzen_equals_mtebs_wrapper_and_its_positions_are_the_authors",
                                "equal below 2000 tokens; above, the authors and mteb cut at 2000, mmbench reads "
                                "the 32768-token window"),
    },
    "e5-v": {
        "text query": Parity(E5V_T + "test_vectors_equal_mtebs_for_text_and_images"),
        "image": Parity(E5V_T + "test_vectors_equal_mtebs_for_text_and_images"),
        "image with text": Parity("", "mteb's wrapper gives text with an image a composed-retrieval prompt "
                                      "('Modify this image with ...'); mmbench its own summary prompt for documents"),
        "interleaved": Parity("", "no reference form: E5-V publishes prompts for a text or an image only"),
        "video frames": Parity("", "no reference form: neither the authors nor mteb take video; mmbench gives "
                                   "frames as images"),
        "long document": Parity("", "not compared by vector: mteb sets no cut, mmbench middle-cuts at the 8192-token "
                                    "Llama-3 window"),
    },
    "doubao-seed-1.6": {
        "text query": Parity(SEED_T + "test_body_matches_mtebs_seed16_wrapper"),
        "image": Parity(SEED_T + "test_body_matches_mtebs_seed16_wrapper"),
        "image with text": Parity(SEED_T + "test_body_matches_mtebs_seed16_wrapper"),
        "interleaved": Parity(SEED_T + "test_body_matches_mtebs_seed16_wrapper",
                              "several images then text: the same request body; images amid text are sent in "
                              "reading order, which mteb's wrapper cannot send"),
        "video frames": Parity("", "mteb's wrapper sends no video; mmbench sends the pool set's frames as image "
                                   "parts"),
        "long document": Parity("", "mteb keeps the head 32000 tiktoken tokens; mmbench middle-cuts at the 128K "
                                    "window"),
    },
}


def parity_markdown() -> str:
    """The per-input-kind parity list of docs/models.md."""
    out: list[str] = []
    for family, cells in PARITY.items():
        out.append(f"- **{', '.join(REFERENCES[family].presets)}**")
        for kind in INPUT_KINDS:
            cell = cells[kind]
            name = f"`{cell.test.split('::')[-1]}`" if cell.test else ""
            verdict = f"equal ({name})" if not cell.difference else \
                f"differs: {cell.difference}" + (f" ({name})" if name else "")
            out.append(f"  - {kind}: {verdict}")
    return "\n".join(out) + "\n"

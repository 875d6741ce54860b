"""The registered Qwen-VL-family embedders: weights, template, context window and vision bounds.

Values come from each model's official inference code or model card; where we could not verify
a value, the preset's notes say so. Official code often caps inputs (GME: max_length 1800;
Qwen3-VL-Embedding: max_length 8192 and 64 frames); mmbench uses the backbone's real window.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmbench.models.qwen_vl import QwenVLEmbedder, QwenVLPreset, VisionBounds
from mmbench.models.templates import GME, QWEN3_VL_EMBEDDING, RZEN, VIDEO_IN_VISION, VLM2VEC

# Qwen2-VL backbone: 14-px patches merged 2x2 -> factor 28; qwen-vl-utils video bounds 128..768 tokens/frame.
QWEN2_VL_VIDEO = dict(video_min_pixels=128 * 28 * 28, video_max_pixels=768 * 28 * 28)
# Qwen3-VL backbone: 16-px patches merged 2x2 -> factor 32.
QWEN3_VL_VIDEO = dict(video_min_pixels=128 * 32 * 32, video_max_pixels=768 * 32 * 32)

GME_VISION = VisionBounds(factor=28, min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28, **QWEN2_VL_VIDEO)
GME_NOTES = ("GME official code: system prompt = task instruction for queries and 'You are a helpful assistant.' "
             "for documents, image before text, prompt ends with '<|endoftext|>' whose final hidden state is "
             "pooled, L2-normalised; min/max image tokens 256/1280; the language model is called with "
             "position_ids=None, so every token, image tokens included, has a 1-D position (positions="
             "'sequential'; gme_inference.py and modeling_gme_qwen2vl.py on the model's hub page, which pin "
             "transformers < 4.52). Deviations: the official max_length of 1800 "
             "tokens is replaced by the Qwen2-VL window (32768); several images are placed in reading order "
             "(official code takes one image per input); video is off by default (GME was not trained on video; "
             "video=True uses the Qwen2-VL backbone's native video path). The default query instruction is GME's "
             "text-to-image one; set query_instruction for other tasks. positions='mrope' runs the backbone's 3-D "
             "multimodal positions instead (another setup). protocol='mteb' runs it as mteb 2.26's wrapper does: "
             "4..1280 image tokens, prompts cut at 1800 tokens at the right, float16.")
# mteb 2.26's GmeQwen2VL (mteb/models/model_implementations/gme_v_models.py): min_image_tokens=4, max_length=1800
# with the processor's right-side truncation, torch_dtype=float16, a '.' appended to a query instruction.
GME_MTEB = {"vision": {"min_pixels": 4 * 28 * 28}, "max_length": 1800, "dtype": "float16", "video": False,
            "template": {"instruction_period": True}}

# mteb 2.26's Qwen3VLEmbeddingWrapper (qwen3_vl_embedding_models.py, through sentence-transformers): the user turn
# in the row's order (a text column ahead of the image puts the text first: here, the document's reading order),
# the processor resizes images (torchvision under transformers 5), prompts cut at 8192 tokens at the right, video
# frames' timestamps at transformers' assumed 24 fps (the sampled frames reach the processor without their rate)
# and the template's vision markup kept around transformers 5's per-frame markup
# (tests/test_models_qwen3vl_parity.py shows each).
QWEN3_MTEB = {"max_length": 8192, "image_resize": "processor", "frame_stamp_fps": 24.0,
              "template": {"single_visual_first": False, "video_placeholder": VIDEO_IN_VISION}}
QWEN3_VISION = VisionBounds(factor=32, min_pixels=4 * 32 * 32, max_pixels=1800 * 32 * 32, fps=1.0,
                            **QWEN3_VL_VIDEO)
QWEN3_NOTES = ("Qwen3-VL-Embedding official script: system turn = instruction (a '.' appended when it does not end "
               "in punctuation; default 'Represent the user's input.'), user turn = content, generation prompt, "
               "last attended token of the final-norm hidden state, L2-normalised; images 4..1800 tokens at factor "
               "32; videos at 1 fps. Deviations: the official max_length 8192 and 64-frame cap are replaced by a "
               "32768-token window (model card: 32K context; unverified against the config); the official total "
               "video pixel budget is not applied (the window bounds it instead); frames are resized with PIL "
               "bicubic rather than torchvision. Query instruction from the README example. Images are resized as the "
               "official script does (qwen-vl-utils, PIL bicubic), pixel for pixel; mteb 2.26's wrapper lets the "
               "processor resize (torchvision under transformers 5) and builds the user turn in its dataset's column "
               "order (tests/test_models_qwen3vl_parity.py). protocol='mteb' runs it as mteb 2.26's wrapper does: "
               "the document's reading order (mteb: its dataset's column order), the processor resizes images, "
               "prompts cut at 8192 tokens at the right, video timestamps at an assumed 24 fps, the template's "
               "vision markup kept around each frame's.")

VLM2VEC_VISION = VisionBounds(factor=28, min_pixels=56 * 56, max_pixels=12845056, **QWEN2_VL_VIDEO)
# V2.0 checkpoint: its processor config caps images at 1003520 px = 1280 tokens (kept by mteb's wrapper too).
VLM2VEC_V2_VISION = replace(VLM2VEC_VISION, max_pixels=1280 * 28 * 28)
# mteb 2.26's VLM2VEC2Wrapper (vlm2vec_models.py): per-task instructions (its VisRAG/ViDoRe document-image ones
# here; 'Understand the content of the provided video.' its video-retrieval tasks give a video), the processor
# resizes images (torchvision under transformers 5), 8 evenly spaced frames per video (a shorter clip's repeated in
# place: mteb.models.modality_collators.frame_indices), bfloat16.
VLM2VEC_MTEB_QUERY = "Find a document image that matches the given query:"
VLM2VEC_MTEB_DOC = "Understand the content of the provided document image."
VLM2VEC_MTEB = {"image_resize": "processor", "num_frames": 8, "dtype": "bfloat16",
                "template": {"query_instruction": VLM2VEC_MTEB_QUERY,
                             "document_instruction": {"text": VLM2VEC_MTEB_DOC, "image": VLM2VEC_MTEB_DOC,
                                                      "video": "Understand the content of the provided video."}}}
VLM2VEC_NOTES = ("VLM2Vec (Qwen2-VL backbone) official format: '<|image_pad|> ' + instruction + ' ' + text with no "
                 "chat markup, last-token pooling of the final hidden state, L2-normalised; the placeholders are the "
                 "bare '<|image_pad|>' / '<|video_pad|>' without vision start/end (VLM2Vec's processor.py, "
                 "VLM_IMAGE_TOKENS). Unverified: the V1 image pixel bounds (we use the Qwen2-VL processor defaults "
                 "3136..12845056), the document instructions per modality and the training max length (we use the "
                 "32768 window). Checkpoints published as LoRA adapters must be merged "
                 "first. Several images are placed in reading order after the instruction. V2's vectors equal mteb "
                 "2.26's wrapper's on a tiny Qwen2-VL for a text query, a text, an image and an image with text; "
                 "an image the processor must resize is resized here with PIL bicubic (transformers' PIL image "
                 "processor, pixel for pixel), where mteb under transformers 5 gets the torchvision one "
                 "(tests/test_models_vlm2vec_parity.py).")

# Ops-MM-embedding and RzenEmbed were checked against mteb 2.26's wrappers for them
# (mteb/models/model_implementations/ops_mm_models.py, rzen_embed_model.py), not against the authors' code.
OPS_MM_VISION = VisionBounds(factor=28, min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28,
                             video_min_pixels=256 * 28 * 28, video_max_pixels=1280 * 28 * 28)
OPS_MM_NOTES = ("Ops-MM-embedding-v1 (as mteb's wrapper runs it): the GME layout — system prompt = task instruction, "
                "'You are a helpful assistant.' otherwise; images first; prompt ends with '<|endoftext|>', last token of "
                "the final hidden state, L2-normalised; images 256..1280 tokens; a video is given as its frames, one "
                "image each, with the image bounds. Deviations: mteb samples 8 frames per video, mmbench keeps the "
                "pool set's 1-FPS frames within the 32768-token window. Not checked against the authors' own code.")
RZEN_VISION = VisionBounds(factor=28, min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28,
                           video_min_pixels=160 * 28 * 28, video_max_pixels=180 * 28 * 28)
RZEN_NOTES = ("RzenEmbed (as mteb's wrapper runs it): system prompt always 'You are a helpful assistant.', the "
              "instruction opens the user turn after the images, prompt ends with '<|endoftext|>', last attended token "
              "of the final-norm hidden state, L2-normalised; images 256..1280 tokens; a video is given as its frames, "
              "one image each at 160..180 tokens. Deviations: the official max_length of 2000 is replaced by the "
              "Qwen2-VL window (32768); mteb joins instruction and text with nothing, mmbench with one space after the "
              "instruction's colon (the authors' example instruction ends in that space); mteb samples 8 frames, "
              "mmbench keeps the 1-FPS frames. The default query instruction is MMEB's text-to-image one (RzenEmbed "
              "was fine-tuned on MMEB-train). Positions: 1-D for every token, as the authors' rzen_embed_inference.py "
              "(github.com/360CVGroup/RzenEmbed: the GME recipe, the text decoder called with position_ids=None) "
              "and mteb's wrapper run it; positions='mrope' gives the backbone's 3-D positions (another setup).")
UNVERIFIED = (" UNVERIFIED: this model's template was not checked against its official code (none found); it reuses {} "
              "by assumption, so it runs Qwen3-VL-Embedding's protocol, whose vectors equal mteb 2.26's wrapper's on a "
              "tiny Qwen3-VL (tests/test_models_qwen3vl_parity.py).")

PRESETS: dict[str, QwenVLPreset] = {p.name: p for p in (
    QwenVLPreset("gme-2b", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", GME, 32768, GME_VISION, video=False,
                 notes=GME_NOTES, positions="sequential", protocols={"mteb": GME_MTEB}),
    QwenVLPreset("gme-7b", "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct", GME, 32768, GME_VISION, video=False,
                 notes=GME_NOTES, positions="sequential", protocols={"mteb": GME_MTEB}),
    QwenVLPreset("qwen3-vl-embedding-2b", "Qwen/Qwen3-VL-Embedding-2B", QWEN3_VL_EMBEDDING, 32768, QWEN3_VISION,
                 notes=QWEN3_NOTES, protocols={"mteb": QWEN3_MTEB}),
    QwenVLPreset("qwen3-vl-embedding-8b", "Qwen/Qwen3-VL-Embedding-8B", QWEN3_VL_EMBEDDING, 32768, QWEN3_VISION,
                 notes=QWEN3_NOTES, protocols={"mteb": QWEN3_MTEB}),
    QwenVLPreset("vlm2vec-2b", "TIGER-Lab/VLM2Vec-Qwen2VL-2B", VLM2VEC, 32768, VLM2VEC_VISION, video=False,
                 notes=VLM2VEC_NOTES + " V1 was trained on images only: video is off."),
    QwenVLPreset("vlm2vec-v2", "VLM2Vec/VLM2Vec-V2.0", replace(VLM2VEC, version="2"), 32768, VLM2VEC_V2_VISION,
                 notes=VLM2VEC_NOTES.replace("we use the Qwen2-VL processor defaults 3136..12845056",
                                             "V2: 3136..1003520, the checkpoint's processor config")
                 + " V2 accepts video ('<|video_pad|> ' prefix); frames kept as sampled. protocol='mteb' runs it as "
                   "mteb 2.26's wrapper does: its document-image retrieval instructions, the processor resizes "
                   "images, 8 evenly spaced frames per video (a shorter clip's repeated in place), bfloat16.",
                 protocols={"mteb": VLM2VEC_MTEB}),
    QwenVLPreset("ops-mm-embedding-2b", "OpenSearch-AI/Ops-MM-embedding-v1-2B", replace(GME, name="ops-mm"),
                 32768, OPS_MM_VISION, video_frames_as_images=True, notes=OPS_MM_NOTES),
    QwenVLPreset("ops-mm-embedding-7b", "OpenSearch-AI/Ops-MM-embedding-v1-7B", replace(GME, name="ops-mm"),
                 32768, OPS_MM_VISION, video_frames_as_images=True, notes=OPS_MM_NOTES),
    QwenVLPreset("rzen-embed", "qihoo360/RzenEmbed", RZEN, 32768, RZEN_VISION, video_frames_as_images=True,
                 notes=RZEN_NOTES, positions="sequential"),
    QwenVLPreset("embed-rl", None, replace(QWEN3_VL_EMBEDDING, name="embed-rl"), 32768, QWEN3_VISION,
                 notes=UNVERIFIED.format("the Qwen3-VL-Embedding template and bounds")
                 + " No hub id recorded: pass --model-path (a Qwen3-VL-based checkpoint is assumed)."),
    QwenVLPreset("mmemb-r1", None, replace(QWEN3_VL_EMBEDDING, name="mmemb-r1"), 32768, QWEN3_VISION,
                 notes=UNVERIFIED.format("the Qwen3-VL-Embedding template and bounds")
                 + " MMEmb-R1 (arXiv 2604.06156) reports a 4B model that reasons before embedding only when it "
                   "helps; no public weights or inference code were found, so its reasoning step is not run and "
                   "no hub id is recorded: pass --model-path (a Qwen3-VL-based checkpoint is assumed)."),
)}


def load_preset(preset: str, **options: Any) -> QwenVLEmbedder:
    """Registry factory: build the embedder for a named preset (see `PRESETS`)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown Qwen-VL preset {preset!r}; known: {', '.join(sorted(PRESETS))}")
    return QwenVLEmbedder(PRESETS[preset], **options)

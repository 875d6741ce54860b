"""Flickr30k caption-space hard negatives (seed 003): text-to-image retrieval among 25 look-alikes.

A pool of Flickr30k images (5,000 by default) with stratified query captions; each query is
ranked against its image and the 24 images whose captions are most similar. Embedding models
rank by similarity (`mmbench run`), LLM listwise rankers by one prompt per query (`mmbench rank`).
"""
from mmbench.builders.designs.flickr_hard_negatives import SOURCES, TASK_NAME, TASK_VERSION

from mmbench.tasks.spec import TaskSpec

TASK = TaskSpec(
    name=TASK_NAME,
    version=TASK_VERSION,
    description="Text-to-image retrieval: find a caption's image among 24 caption-space hard negatives",
    reference="Can Frontier LLMs Match Natively Multimodal Embeddings? (seed 003)",
    builder="mmbench.builders.flickr_hard_negatives:build",
    sources=SOURCES,
    length_bins=(),
    difficulties=("hard",),
    modalities=("text", "image"),
    metrics=("recall_at_1", "recall_at_3", "mrr"),
    main_score="recall_at_1",
    summary_axes=("caption_index",),
    strata=("caption_index",),
    default_params={},
    source_params={
        "dataset": "hf: parquet file/folder or `datasets` name with image + captions columns (e.g. nlphuji/flickr30k), or hf:<id>@<commit> to pin the revision",
        "hf_split": "hf: the split to load (default test, the only split of nlphuji/flickr30k)",
        "annotations": "token: results_20130124.token; karpathy: dataset_flickr30k.json; "
                       "csv: results.csv / flickr_annotations_30k.csv / image,caption CSV",
        "image_root": "token/karpathy/csv: folder holding the image files, or the release's .zip/.tar of them",
        "split": "optional Karpathy split filter (train, val, test)",
        "caption_model": "sentence-transformers model for caption similarity: hub id or local folder (default "
                         "all-mpnet-base-v2; `minilm` = the packaged all-MiniLM-L6-v2, the sample's default)",
        "allow_missing": "true: build even when more than 1% of the source images are unusable (missing file, "
                         "fewer than 5 captions); they are counted in the manifest either way",
    },
    validator="mmbench.builders.checks.flickr_hard_negatives",
    services={"load_caption_model": "mmbench.models.sentence_transformer:load_caption_model"},
    fresh_renews=("the image pool, the query images and every candidate order"),
)

"""RAVEL: training-free vision-encoder evaluation for MLLMs (seed 000_601f80d1dc1ae5b3), its
baselines, CKA-X, and correlation of any predictor with measured MLLM performance."""
from mmbench.evaluators.ravel.chamfer import chamfer_similarity_matrix, chamfer_similarity_naive
from mmbench.evaluators.ravel.neighbours import chance_level, mutual_knn_score, topk_neighbours
from mmbench.evaluators.ravel.score import K_DEFAULT, RavelResult, ravel_score
from mmbench.evaluators.ravel.whitening import EPS_DEFAULT, StabilizedWhitening, fit_pca, postprocess

__all__ = [
    "EPS_DEFAULT", "K_DEFAULT", "RavelResult", "StabilizedWhitening", "chance_level",
    "chamfer_similarity_matrix", "chamfer_similarity_naive", "fit_pca", "mutual_knn_score",
    "postprocess", "ravel_score", "topk_neighbours",
]

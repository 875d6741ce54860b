"""Statistics over per-query results: pure functions, each returning a dataclass with `to_dict()`.

* `paired_ttest`          paired t-test + bootstrap CI of the mean difference + Cohen's d_z
* `bootstrap_ci`          percentile bootstrap CI of a mean (seeded)
* `bootstrap_mean_diff_ci` paired percentile bootstrap CI of mean(a - b)
* `mcnemar`, `mcnemar_table`, `contingency_table`   McNemar on paired binary outcomes (2x2 table)
* `wilcoxon_signed_rank`  Wilcoxon signed-rank on paired continuous scores
* `correct_pvalues`       Bonferroni / Holm across a family of tests
* `positional_bias_lmm`   mixed-effects depth model, Wald joint test, quadratic U-shape test
* `modality_robustness`   mean / sample sd across text, mixed, image backgrounds and a typing
* `rank_models`           bootstrap rank intervals and Holm tiers of models over per-item scores (`ranking`)
* `design_floor`, `observed_floor`  resolution floors: minimum detectable paired differences (`floors`)

The submodules load on first use of one of their names (a module `__getattr__`), so importing the package
costs nothing and a command imports scipy/statsmodels only for the statistics it computes.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmbench.evaluators.stats.bootstrap import BootstrapCI, bootstrap_ci, bootstrap_mean_diff_ci
    from mmbench.evaluators.stats.floors import Floor, binary_floor, design_floor, observed_floor, sd_floor
    from mmbench.evaluators.stats.ranking import Ranking, rank_models
    from mmbench.evaluators.stats.correction import CorrectionResult, adjust_pvalues, correct_pvalues
    from mmbench.evaluators.stats.mcnemar import McNemarResult, contingency_table, mcnemar, mcnemar_table
    from mmbench.evaluators.stats.paired import EFFECT_SIZE_KIND, PairedTTestResult, cohens_dz, paired_ttest
    from mmbench.evaluators.stats.positional import PositionalBiasResult, positional_bias_lmm, sort_length_bins, wald_chi2
    from mmbench.evaluators.stats.robustness import MODALITIES, ModalityRobustness, modality_robustness
    from mmbench.evaluators.stats.wilcoxon import WilcoxonResult, wilcoxon_signed_rank

_SOURCE = {name: module for module, names in (
    ("mmbench.evaluators.stats.bootstrap", ('BootstrapCI', 'bootstrap_ci', 'bootstrap_mean_diff_ci')),
    ("mmbench.evaluators.stats.floors", ('Floor', 'binary_floor', 'design_floor', 'observed_floor', 'sd_floor')),
    ("mmbench.evaluators.stats.ranking", ('Ranking', 'rank_models')),
    ("mmbench.evaluators.stats.correction", ('CorrectionResult', 'adjust_pvalues', 'correct_pvalues')),
    ("mmbench.evaluators.stats.mcnemar", ('McNemarResult', 'contingency_table', 'mcnemar', 'mcnemar_table')),
    ("mmbench.evaluators.stats.paired", ('EFFECT_SIZE_KIND', 'PairedTTestResult', 'cohens_dz', 'paired_ttest')),
    ("mmbench.evaluators.stats.positional", ('PositionalBiasResult', 'positional_bias_lmm', 'sort_length_bins', 'wald_chi2')),
    ("mmbench.evaluators.stats.robustness", ('MODALITIES', 'ModalityRobustness', 'modality_robustness')),
    ("mmbench.evaluators.stats.wilcoxon", ('WilcoxonResult', 'wilcoxon_signed_rank')),
) for name in names}

__all__ = [
    "BootstrapCI", "bootstrap_ci", "bootstrap_mean_diff_ci",
    "CorrectionResult", "adjust_pvalues", "correct_pvalues",
    "McNemarResult", "contingency_table", "mcnemar", "mcnemar_table",
    "EFFECT_SIZE_KIND", "PairedTTestResult", "cohens_dz", "paired_ttest",
    "PositionalBiasResult", "positional_bias_lmm", "sort_length_bins", "wald_chi2",
    "MODALITIES", "ModalityRobustness", "modality_robustness",
    "WilcoxonResult", "wilcoxon_signed_rank",
    "Floor", "binary_floor", "design_floor", "observed_floor", "sd_floor", "Ranking", "rank_models",
]


def __getattr__(name: str) -> Any:
    if name not in _SOURCE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_SOURCE[name]), name)
    globals()[name] = value
    return value

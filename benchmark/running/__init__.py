"""Running a model on a pool set: views, batching, executors, the runner, one evaluation, sweeps; RAVEL's
feature extraction (`ravel_features`) and tables (`ravel_inputs`).

Imports: common, data, the pure evaluators (metrics, ordering), tasks, models, results' storage layouts, and the
source readers RAVEL's calibration images and tables come through.
"""

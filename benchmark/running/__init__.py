"""Running a model on a pool set: views, batching, executors, the runner, one evaluation, sweeps.

Imports: common, data, the pure evaluators (metrics, ordering), tasks, models, results' storage layouts.
"""

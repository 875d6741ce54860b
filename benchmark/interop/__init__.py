"""mmbench pool sets in other tools' layouts: an mteb retrieval folder and an in-process mteb task.

Imports: anything up to the runner and results; nothing imports interop except the API and the CLI.
"""

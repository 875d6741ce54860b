"""Construction steps the task builders are made of: expansion, evidence chains, Hard variants, look-alikes,
events and video, pools, validity, seeding, the chat endpoint of the LLM steps.

Imports: `mmbench.common`, `mmbench.data`, `mmbench.builders.sources` and one another (never a task builder,
`mmbench.tasks` or `mmbench.models`: a step that needs a model is handed a loader).
"""

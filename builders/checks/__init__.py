"""Per-task invariant checks: one module per task, each with INVARIANTS and check(ps, checked)."""

"""The trace: its schema and records (pure, emitted by the cores), the writer the shells use, and reading a run's rows back."""

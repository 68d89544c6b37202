"""Replay logic, pure: crash points, fault schedules, message holds, scripted scenarios, and the proofs that a replayed bug's preconditions held."""

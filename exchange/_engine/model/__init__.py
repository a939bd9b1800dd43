"""The engine's vocabulary: operator commands and the views of runs, prompts and steps that every surface shows."""

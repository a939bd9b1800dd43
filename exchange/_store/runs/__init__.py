"""Records of runs: the runs themselves, their steps, streams, messages and prompts, lookups, reruns, attention
and retention."""

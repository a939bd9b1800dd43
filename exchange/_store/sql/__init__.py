"""Talking to the database: connections and their per-backend settings, typed statements, the group committer,
the hot-path statements, clocks, fault points and statistics."""

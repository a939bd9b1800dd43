"""Running one step of a run durably: the run's context, its lease, replay of recorded steps, retries and holds
on failure, and the decorators that turn functions into workflows and steps."""

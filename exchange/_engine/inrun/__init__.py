"""Operations a workflow performs on its own run (receive, state, sleep, events, streams, child runs, prompts,
patched), and the facade the authoring API re-exports."""

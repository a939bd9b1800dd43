"""What a workflow is: the registry of workflows, their signatures and parameter types, and the fields of
prompts."""

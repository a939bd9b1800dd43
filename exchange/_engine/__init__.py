"""The durable engine (private: the authoring API is exchange.workflows.bootstrap,
exchange.workflows.engine.instance and exchange.workflows.steps)."""

"""The runtime: the one way in for the CLI, the Python API, the HTTP API and the OPC UA server of runs (start,
read, command, answer, cancel, retry, fork), and the views it returns."""

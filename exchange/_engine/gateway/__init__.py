"""The gateway process: the dispatcher that claims runs, the executor that runs them, leases and takeover, fair
share, saturation, store outages, the code watcher, retention and maintenance."""

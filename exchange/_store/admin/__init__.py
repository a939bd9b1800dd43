"""Records kept for people: accounts, the audit log and run templates."""

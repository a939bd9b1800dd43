"""Who may use the HTTP API and the console: users with passwords, API tokens, console sessions and
roles (viewer < operator < engineer < admin, and the config's ``[roles.NAME]``), each a set of rights
(:mod:`exchange._roles`). The CLI and the API use :class:`~exchange._auth.accounts.Accounts`."""

"""Who may use the HTTP API and the console: users with passwords, API tokens, console sessions and
roles (viewer < operator < engineer < admin). The CLI and the API use :class:`~exchange._auth.accounts.Accounts`."""

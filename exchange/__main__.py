"""``python -m exchange`` is the ``exchange`` command."""

from exchange.cli.main import main

main()

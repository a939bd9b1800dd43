"""``python -m exchange`` is the ``exchange`` command."""

from exchange._cli.main import main

main()

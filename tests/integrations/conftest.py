from tests.integrations.fixtures import (  # noqa: F401
    controlled_postgres,
    http_server,
    running_postgres,
    scripted_http_server,
)

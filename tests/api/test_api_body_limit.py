"""The body limit (``[api] max_body_bytes``) against a real gateway's web server: a body over it is
refused with 413 however it is sent, by its Content-Length or ``Transfer-Encoding: chunked`` (which
got FastAPI's 400 "There was an error parsing the body"), and nothing is started."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

from tests.api.conftest import ApiGateway
from tests.api.test_api_runs import _one_line_error

BODY_LIMIT_BYTES = 1_048_576  # the default


def _run_count(api: ApiGateway) -> int:
    return len(api.call("GET", "/api/v1/runs", "viewer", params={"limit": 1000}).json())


def _post_chunked(api: ApiGateway, chunks: list[bytes]) -> tuple[int, str]:
    """POST /api/v1/runs with Transfer-Encoding: chunked (no Content-Length): the status and body."""
    address = urlsplit(api.url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=20)
    try:
        connection.putrequest("POST", "/api/v1/runs")
        connection.putheader("Authorization", f"Bearer {api.tokens['engineer']}")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        try:
            for chunk in chunks:
                connection.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            connection.send(b"0\r\n\r\n")
        except OSError:
            pass  # the server may answer and close before taking the rest: the answer is what counts
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_a_chunked_body_over_the_limit_gets_413_and_one_under_it_is_taken(api: ApiGateway) -> None:
    before = _run_count(api)
    padding = b" " * 4096
    over = [b'{"workflow": "api.batch", "params": {}', *[padding] * (2 * BODY_LIMIT_BYTES // 4096), b"}"]
    status, text = _post_chunked(api, over)
    assert status == 413 and "max_body_bytes" in text, (status, text)
    assert _run_count(api) == before
    status, text = _post_chunked(api, [b'{"workflow": "api.batch",', b' "params": {}}'])
    assert status == 201, (status, text)
    answer = api.call("POST", "/api/v1/runs", "engineer", data=b"x" * (BODY_LIMIT_BYTES + 1),
                      headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and "max_body_bytes" in _one_line_error(answer)

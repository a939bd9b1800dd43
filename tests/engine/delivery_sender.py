"""A process that sends messages and commands when told to, for the delivery tests.

``python -m tests.engine.delivery_sender STORE_URL MODE`` with MODE ``client`` (a plain process, as the
CLI or a script would be) or ``gateway`` (a second gateway on the same store, with its own dispatcher
and mail watcher, serving a queue of its own so it executes none of the test's runs). It prints
``ready``, then answers each JSON line on stdin with one JSON line on stdout:

- ``{"send": RUN, "topic": T, "message": M}`` -> ``{"id": message id}``
- ``{"command": RUN, "cmd": C}`` -> ``{"id": message id}``
- ``{"answer": RUN, "key": K, "values": V}`` -> ``{"id": 1}`` (the prompt's answer)
"""

from __future__ import annotations

import json
import sys
import tempfile

from exchange._config import config_from_dict
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator.runtime import Runtime

SENDER_QUEUE = "delivery-sender"  # the sending gateway serves this queue; the tests start nothing on it


def main(store_url: str, mode: str) -> None:
    config = config_from_dict(
        {"store": {"url": store_url}, "apps": {"paths": []},
         "engine": {"node_id": "delivery-sender", "workers": 2}},
        base_dir=tempfile.mkdtemp(prefix="exchange-sender-"),
    )
    runtime = Runtime(config)
    dispatcher = Dispatcher(runtime, queues=[SENDER_QUEUE]) if mode == "gateway" else None
    if dispatcher is not None:
        dispatcher.start()
    print("ready", flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        if "send" in order:
            message_id = runtime.send(order["send"], order["topic"], order["message"], actor="sender")
        elif "answer" in order:
            runtime.answer_prompt(order["answer"], order["key"], order["values"], actor="sender")
            message_id = 1
        else:
            message_id = runtime.send_command(order["command"], order["cmd"], actor="sender")
        print(json.dumps({"id": message_id}), flush=True)
    if dispatcher is not None:
        dispatcher.stop()
    runtime.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""``exchange simulate``: serve the simulated plant and print the Exchange config that matches it.

The config goes to stdout (or ``--config-out FILE``); then one line ``simulated plant ready`` goes to
stderr, and the plant runs until SIGINT or SIGTERM, when the servers are stopped and the command exits 0.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

logger = logging.getLogger(__name__)

READY_LINE = "simulated plant ready"


def _check_port_free(protocol: str, host: str, port: int) -> None:
    """Refuse a fixed port already in use: cpppo sets SO_REUSEPORT and would silently share it.

    SO_REUSEADDR lets the probe bind over connections our last run left in TIME_WAIT or FIN_WAIT_2
    (else a restart after a stop with clients connected is refused for about a minute), while a
    socket listening on the port still refuses it. The probe must not set SO_REUSEPORT: a live cpppo
    server would then accept it and go unnoticed.
    """
    if port == 0:
        return
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        reason = "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        raise click.ClickException(f"{protocol} port {port} on {host} {reason}") from exc


def _parse_protocols(text: str) -> tuple[str, ...]:
    from simulators.protocol_map import parse_protocols

    try:
        return parse_protocols(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--protocols") from exc


@click.command("simulate")
@click.option("--modbus-port", type=click.IntRange(0, 65535), default=5020, show_default=True,
              help="Modbus TCP port (0: a free port).")
@click.option("--opcua-port", type=click.IntRange(0, 65535), default=4840, show_default=True,
              help="OPC UA port (0: a free port).")
@click.option("--enip-port", type=click.IntRange(0, 65535), default=44818, show_default=True,
              help="EtherNet/IP port (0: a free port).")
@click.option("--modbus-transport", type=click.Choice(["tcp", "rtu-over-tcp", "serial"]), default="tcp",
              show_default=True,
              help="Modbus TCP, RTU frames over TCP, or RTU on a serial line (a socat pty pair; the config "
                   "names the end to open).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the servers listen on.")
@click.option("--protocols", default="modbus,opcua,enip", show_default=True,
              help="Protocols to serve; areas of a left-out protocol go to the first one listed.")
@click.option("--config-out", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="Write the matching Exchange config to FILE instead of stdout.")
@click.option("--tick-hz", type=click.FloatRange(min=0.1, max=1000.0), default=10.0, show_default=True,
              help="Physics updates per second.")
def simulate(modbus_port: int, opcua_port: int, enip_port: int, modbus_transport: str, host: str, protocols: str,
             config_out: Path | None, tick_hz: float) -> None:
    """Serve a simulated plant (tank, mixer, heater) over Modbus TCP, OPC UA and EtherNet/IP."""
    from simulators.plant_servers import PlantServers

    chosen = _parse_protocols(protocols)
    requested = {"modbus": modbus_port, "opcua": opcua_port, "enip": enip_port}
    plant = PlantServers(protocols=chosen, host=host, ports=requested, tick_hz=tick_hz,
                         modbus_transport=modbus_transport)
    for proto in plant.protocols:
        if not (proto == "modbus" and modbus_transport == "serial"):  # a serial line has no port
            _check_port_free(proto, host, requested[proto])

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[int, Any] = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            plant.start()
        except Exception as exc:
            raise click.ClickException(f"the simulated plant could not start on {host}: {exc}") from exc
        try:
            text = plant.config_text
            if config_out is None:
                click.echo(text, nl=False)
                sys.stdout.flush()
            else:
                try:
                    config_out.write_text(text, encoding="utf-8")
                except OSError as exc:
                    raise click.ClickException(f"cannot write the config to {config_out}: {exc}") from exc
            click.echo(READY_LINE, err=True)
            sys.stderr.flush()
            while not stop.wait(0.5):
                pass
        finally:
            plant.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("simulated plant stopped", err=True)


if __name__ == "__main__":
    simulate()

"""``exchange simulate``: serve a simulated plant and print the Exchange config that reaches it.

With ``--from-config FILE`` (or a bare ``--from-config``: the config every other command reads):
every device of that config, each on its configured port (or free ports
with ``--free-ports``), played as its ``[simulation]`` says. Without it: the demo line (Line1).
A device or tag that cannot be served, or a port in use, is an error naming it before anything
listens. The config goes to stdout (or ``--config-out FILE``); then one line per device and
``simulated plant ready`` go to stderr, and the plant runs until SIGINT or SIGTERM, when the servers
are stopped and the command exits 0.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from exchange._cli.common import Context
from exchange.errors import ConfigError

if TYPE_CHECKING:
    from simulators.engine import SimulatedPlant

logger = logging.getLogger(__name__)

READY_LINE = "simulated plant ready"
_DEMO_OPTIONS = ("modbus_port", "opcua_port", "enip_port", "modbus_transport", "protocols", "tick_hz")


def _parse_protocols(text: str) -> tuple[str, ...]:
    from simulators.protocol_map import parse_protocols

    try:
        return parse_protocols(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--protocols") from exc


def _demo(host: str, protocols: str, ports: dict[str, int], free_ports: bool, tick_hz: float,
          modbus_transport: str) -> SimulatedPlant:
    from simulators.plant_servers import PlantServers

    chosen = _parse_protocols(protocols)
    requested = {proto: 0 if free_ports else port for proto, port in ports.items() if proto in chosen}
    return PlantServers(protocols=chosen, host=host, ports=requested, tick_hz=tick_hz,
                        modbus_transport=modbus_transport)


def _from_config(path: Path, host: str, free_ports: bool) -> SimulatedPlant:
    from simulators.engine import SimulatedPlant

    return SimulatedPlant.from_file(path, host=host, free_ports=free_ports)


def _config_path(ctx: click.Context, given: str) -> Path:
    """The file of ``--from-config FILE``; for a bare ``--from-config``, the one every other command
    reads (``exchange --config``, ``$EXCHANGE_CONFIG``, ``./exchange.toml``). UsageError naming what
    was looked for when there is none, or the file when it is not one."""
    from exchange._config import config_file

    shared = ctx.find_object(Context)  # exchange's own options (None when simulate runs on its own)
    chosen = Path(given) if given else config_file(shared.config_path if shared is not None else None)
    if chosen is None:
        raise click.UsageError("--from-config: no config to serve: give --from-config FILE, or exchange --config "
                               "FILE, or set EXCHANGE_CONFIG, or run it in the folder of exchange.toml")
    path = Path(chosen)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise click.BadParameter(f"{str(path)!r} {what}", param_hint="--from-config")
    return path


def _serve(plant: SimulatedPlant, config_out: Path | None) -> None:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[int, Any] = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            plant.start()
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
        try:
            if config_out is None:
                click.echo(plant.config_text, nl=False)
                sys.stdout.flush()
            else:
                try:
                    plant.write_config(config_out)
                except OSError as exc:
                    raise click.ClickException(f"cannot write the config to {config_out}: {exc}") from exc
            for name, device in plant.spec.devices.items():
                click.echo(f"  {name} ({device.config.driver}) on {plant.endpoint(name)}", err=True)
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


@click.command("simulate")
@click.option("--from-config", "from_config", metavar="[FILE]", is_flag=False, flag_value="", default=None,
              help="Serve every device of this Exchange config (with its [simulation]); without FILE, the config "
                   "the other commands read (--config, $EXCHANGE_CONFIG or ./exchange.toml).")
@click.option("--free-ports", is_flag=True, help="Serve on free ports; the written config has the real ones.")
@click.option("--modbus-port", type=click.IntRange(0, 65535), default=5020, show_default=True,
              help="Demo line: Modbus TCP port (0: a free port).")
@click.option("--opcua-port", type=click.IntRange(0, 65535), default=4840, show_default=True,
              help="Demo line: OPC UA port (0: a free port).")
@click.option("--enip-port", type=click.IntRange(0, 65535), default=44818, show_default=True,
              help="Demo line: EtherNet/IP port (0: a free port).")
@click.option("--modbus-transport", type=click.Choice(["tcp", "rtu-over-tcp", "serial"]), default="tcp",
              show_default=True,
              help="Demo line: Modbus TCP, RTU frames over TCP, or RTU on a serial line (a socat pty pair; the "
                   "config names the end to open).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the servers listen on.")
@click.option("--protocols", default="modbus,opcua,enip", show_default=True,
              help="Demo line: protocols to serve; areas of a left-out protocol go to the first one listed.")
@click.option("--config-out", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
              help="Write the config that reaches the simulator to FILE instead of stdout.")
@click.option("--tick-hz", type=click.FloatRange(min=0.1, max=1000.0), default=10.0, show_default=True,
              help="Demo line: physics updates per second.")
@click.pass_context
def simulate(ctx: click.Context, from_config: str | None, free_ports: bool, modbus_port: int, opcua_port: int,
             enip_port: int, modbus_transport: str, host: str, protocols: str, config_out: Path | None,
             tick_hz: float) -> None:
    """Serve a simulated plant: your config's devices (--from-config), or the demo line."""
    if from_config is not None:
        given = [name for name in _DEMO_OPTIONS
                 if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
        if given:
            options = ", ".join("--" + name.replace("_", "-") for name in given)
            raise click.UsageError(f"{options}: for the demo line only; with --from-config the ports are the "
                                   "config's (or --free-ports) and the tick is [simulation] tick_ms")
    try:
        if from_config is not None:
            plant = _from_config(_config_path(ctx, from_config), host, free_ports)
        else:
            ports = {"modbus": modbus_port, "opcua": opcua_port, "enip": enip_port}
            plant = _demo(host, protocols, ports, free_ports, tick_hz, modbus_transport)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    _serve(plant, config_out)


if __name__ == "__main__":
    simulate()

"""The config-driven simulator at plant size (issue 29): start-up time and CPU while it ticks.

    .venv/bin/python bench/sim.py [--tags 2000] [--tick-ms 100] [--seconds 20]

A generated config with ``--tags`` tags over three devices (Modbus TCP 40 %, OPC UA 35 %, EtherNet/IP
25 %: coils and Float32/Int16 registers, Boolean/Double/Int16 nodes, BOOL/REAL/DINT tags), a
``follows`` for one tag in ten and a model that moves 200 points each tick. Prints:

- the time to work the config out (``build_spec`` and the servers built) and to start every server
  (they start side by side; OPC UA's address space and cpppo's child dominate);
- one tick's cost (read every point from its server, step, send the changes), p50/p90/p99 over 50
  ticks driven by hand;
- the CPU of this process and of the EtherNet/IP child while the ticker runs at ``--tick-ms`` for
  ``--seconds``, in % of one core, and how many ticks ran.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import psutil
from common import ROOT, percentile  # noqa: F401 - ROOT puts the repository on sys.path

from simulators.engine import SimulatedPlant

MODEL = '''
import math


def step(plant, dt_s):
    t = plant.time_s
    for i in range(200):
        plant[f"[bench]Line/L{i}"] = 50.0 + 40.0 * math.sin(t / 10.0 + i)
'''


def config(tags: int, tick_ms: int) -> str:
    """A config of ``tags`` tags over three devices (see the module docstring)."""
    modbus, opcua = int(tags * 0.40), int(tags * 0.35)
    enip = tags - modbus - opcua
    lines = ['[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = 502\n',
             '[devices.line]\ndriver = "opcua"\nurl = "opc.tcp://127.0.0.1:4840/line/"\n',
             '[devices.logix]\ndriver = "enip"\nhost = "127.0.0.1"\n']
    simulation = [f"[simulation]\ntick_ms = {tick_ms}\nmodel = \"model.py\"\n"]
    names: list[str] = []

    def tag(path: str, device: str, address: str, extra: str = "") -> None:
        names.append(path)
        lines.append(f'[tags."{path}"]\ndevice = "{device}"\naddress = "{address}"\n{extra}')

    for i in range(modbus):
        if i < 200:
            tag(f"[bench]Line/L{i}", "plc", f"IRF{1 + 2 * i}", 'access = "ro"\n')
        elif i % 2:
            tag(f"[bench]Plc/C{i}", "plc", f"C{i}")
        else:
            tag(f"[bench]Plc/H{i}", "plc", f"HR{1000 + i}")
    for i in range(opcua):
        kind = ("Boolean", "Double", "Int16")[i % 3]
        tag(f"[bench]Ua/N{i}", "line", f"ns=2;s=Line.N{i}")
        simulation.append(f'[simulation.tags."[bench]Ua/N{i}"]\ntype = "{kind}"\n')
    for i in range(enip):
        kind = ("BOOL", "REAL", "DINT")[i % 3]
        tag(f"[bench]Logix/T{i}", "logix", f"T_{i}", f'type = "{kind}"\n')
    booleans = [n for n in names if "/C" in n]
    for source, follower in zip(booleans[::2], booleans[1::2]):
        if len(simulation) > tags // 10:
            break
        simulation.append(f'[simulation.tags."{follower}"]\nfollows = "{source}"\ndelay_ms = 300\n')
    return "\n".join(lines + simulation)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tags", type=int, default=2000)
    parser.add_argument("--tick-ms", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-sim-"))
    (folder / "model.py").write_text(MODEL)
    (folder / "exchange.toml").write_text(config(args.tags, args.tick_ms))
    print(f"{args.tags} tags over 3 devices, tick_ms = {args.tick_ms}, on {psutil.cpu_count()} cores", flush=True)

    started = time.perf_counter()
    sim = SimulatedPlant.from_file(folder / "exchange.toml", free_ports=True)
    built = time.perf_counter()
    sim.start(ticker=False)
    listening = time.perf_counter()
    print(f"config worked out and servers built: {built - started:.2f} s; all servers listening: "
          f"{listening - built:.2f} s (total {listening - started:.2f} s)", flush=True)
    try:
        ticks: list[float] = []
        for _ in range(50):
            t0 = time.perf_counter()
            sim.sync_step(args.tick_ms / 1000)
            ticks.append((time.perf_counter() - t0) * 1000)
        print(f"one tick by hand: p50 {percentile(ticks, 50):.1f} ms, p90 {percentile(ticks, 90):.1f} ms, "
              f"p99 {percentile(ticks, 99):.1f} ms", flush=True)

        me = psutil.Process()
        sim.stop()  # ticker off; restart everything with the ticker on
        sim.start()
        me_cpu0 = sum(me.cpu_times()[:2])
        kids = me.children(recursive=True)
        kids_cpu0 = [sum(c.cpu_times()[:2]) for c in kids]
        wall, time_before = time.perf_counter(), sim.time_s
        time.sleep(args.seconds)  # a bench: the measured interval itself
        elapsed = time.perf_counter() - wall
        me_cpu = (sum(me.cpu_times()[:2]) - me_cpu0) / elapsed * 100
        kids_cpu = sum(sum(c.cpu_times()[:2]) - c0 for c, c0 in zip(kids, kids_cpu0)) / elapsed * 100
        print(f"ticking {elapsed:.0f} s: this process {me_cpu:.1f} % of a core, EtherNet/IP child "
              f"{kids_cpu:.1f} %; simulated {sim.time_s - time_before:.1f} s "
              f"(~{(sim.time_s - time_before) * 1000 / args.tick_ms:.0f} ticks)", flush=True)
    finally:
        sim.stop()


if __name__ == "__main__":
    main()

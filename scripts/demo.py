"""The README demo: a simulated plant, a gateway, and the plant batch steered by an operator.

Everything goes through the ``exchange`` command, as an operator would use it: ``exchange simulate``
serves the plant over Modbus TCP, OPC UA and EtherNet/IP on free ports and writes the matching config;
``exchange gateway`` runs the workflows and serves the operators' console; ``exchange start`` /
``send`` / ``show`` drive the batch. ``--keep``: leave the plant and the gateway running at the end
(Ctrl-C stops them), to look around the console.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "var" / "demo"
DEMO_USER, DEMO_PASSWORD = "demo", "exchange-demo"  # an engineer, made for the demo's console


def exchange(*args: str) -> list[str]:
    return [sys.executable, "-m", "exchange", "--config", str(WORK / "exchange.toml"), *args]


def spawn_until(cmd: list[str], ready_text: str, log_path: Path, timeout_s: float = 60) -> subprocess.Popen[str]:
    """Start ``cmd``; return once its stderr shows ``ready_text`` (its stderr goes on into ``log_path``)."""
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by the reader thread
    proc = subprocess.Popen(cmd, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.write(line)
            log.flush()
            if ready_text in line:
                ready.set()
        log.close()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout_s):
        proc.kill()
        raise SystemExit(f"{' '.join(cmd[3:6])} did not get ready in {timeout_s}s; see {log_path}")
    return proc


def show(run_id: str) -> dict[str, Any]:
    out = subprocess.run(exchange("show", run_id, "--json"), cwd=WORK, capture_output=True, text=True, check=True)
    view: dict[str, Any] = json.loads(out.stdout)
    return view


def send(run_id: str, cmd: str, reason: str) -> None:
    subprocess.run(exchange("send", run_id, cmd, "--reason", reason), cwd=WORK, check=True)


def follow(run_id: str, until: Any, timeout_s: float = 120) -> dict[str, Any]:
    """Print progress changes until ``until(view)`` is true."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        view = show(run_id)
        line = (view["state"], (view["progress"] or {}).get("message"))
        if line != last:
            print(f"  [{view['status']:<8} {view['state'] or '':<8}] {line[1] or ''}", flush=True)
            last = line
        if until(view):
            return view
        if time.monotonic() > deadline:
            raise SystemExit(f"the demo run did not get there in {timeout_s}s: {view['status']}")
        time.sleep(0.3)


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    print("1. starting the simulated plant (Modbus TCP, OPC UA, EtherNet/IP on free ports)", flush=True)
    plant = spawn_until(
        [sys.executable, "-m", "exchange", "simulate", "--free-ports", "--config-out", str(WORK / "plant.toml")],
        "simulated plant ready", WORK / "plant.log",
    )
    processes = [plant]
    try:
        (WORK / "exchange.toml").write_text(
            '[store]\nurl = "sqlite:///exchange.db"\n\n'
            f'[apps]\npaths = ["{ROOT / "apps"}"]\n\n'
            '[engine]\nprogress_interval_ms = 200\n\n'
            + (WORK / "plant.toml").read_text()
        )
        print(f"   config: {WORK / 'exchange.toml'}", flush=True)
        print("2. starting the gateway, with the operators' console", flush=True)
        subprocess.run(exchange("users", "add", DEMO_USER, "--role", "engineer", "--password-env", "DEMO_PASSWORD"),
                       cwd=WORK, check=True, capture_output=True, env={**os.environ, "DEMO_PASSWORD": DEMO_PASSWORD})
        processes.append(spawn_until(exchange("gateway", "--api", "127.0.0.1:0"), "ready", WORK / "gateway.log"))
        found = re.search(r"gateway API listening on (\S+)", (WORK / "gateway.log").read_text())
        console = found.group(1) if found else "(see gateway.log)"
        print(f"   console: {console}/ (user {DEMO_USER}, password {DEMO_PASSWORD})", flush=True)
        print("3. starting the batch: fill to 40 %, mix, heat to 35 degC", flush=True)
        started = subprocess.run(exchange("start", "plant.batch", "--json"), cwd=WORK, capture_output=True,
                                 text=True, check=True)
        run_id = json.loads(started.stdout)["id"]
        print(f"   run {run_id}", flush=True)
        follow(run_id, lambda v: (((v["progress"] or {}).get("extra")) or {}).get("level", 0) >= 15)
        print("4. operator: HOLD (the batch closes the inlet valve and waits)", flush=True)
        send(run_id, "HOLD", "sample the tank")
        follow(run_id, lambda v: v["state"] == "HELD")
        print("5. operator: RESUME", flush=True)
        send(run_id, "RESUME", "sample OK")
        view = follow(run_id, lambda v: v["status"] in ("SUCCESS", "ERROR", "CANCELLED"))
        print(f"6. the batch finished: {view['status']} {json.dumps(view['result'] or view['error'])}")
        writes = [e for e in view["events"] if e["kind"] == "tag_write"]
        commands = [e for e in view["events"] if e["kind"] == "command"]
        print(f"   {len(view['steps'])} recorded steps, {len(writes)} audited tag writes, "
              f"commands: {', '.join(e['payload']['cmd'] + ' by ' + str(e['actor']) for e in commands)}")
        print(f"   full history: .venv/bin/exchange --config {WORK / 'exchange.toml'} show {run_id}")
        if view["status"] != "SUCCESS":
            raise SystemExit(1)
        if "--keep" in sys.argv[1:]:
            print(f"7. the plant and the gateway keep running: open {console}/runs/{run_id} (Ctrl-C stops them)",
                  flush=True)
            try:
                processes[-1].wait()
            except KeyboardInterrupt:
                pass
    finally:
        for proc in reversed(processes):
            proc.terminate()
        for proc in processes:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()

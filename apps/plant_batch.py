"""The demo batch on the simulated plant: fill the tank, mix, heat, with operator HOLD/RESUME/STOP.

Tag paths are the simulated plant's (``exchange simulate`` prints the matching config). Every write is
confirmed by its feedback tag; on HOLD the inlet valve is closed and the batch waits for RESUME, then
reopens it and carries on; on STOP everything is switched off and the batch ends cleanly.
"""

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import tags, wait
from exchange.workflows.steps.sleep import sleep_chunked

LINE = "[plant]Line1/"
INLET_CMD = LINE + "Tank/InletValve/Cmd"
INLET_OPEN = LINE + "Tank/InletValve/Open"
LEVEL = LINE + "Tank/Level"
MIXER_CMD = LINE + "Mixer/RunCmd"
MIXER_RUNNING = LINE + "Mixer/Running"
MIXER_SPEED = LINE + "Mixer/Speed"
HEATER_ENABLE = LINE + "Heater/Enable"
HEATER_SETPOINT = LINE + "Heater/Setpoint"
TEMPERATURE = LINE + "Heater/Temperature"


def shut_down():
    """Everything off, each write confirmed."""
    tags.write_confirm(INLET_CMD, False, confirm_path=INLET_OPEN)
    tags.write_confirm(MIXER_CMD, False, confirm_path=MIXER_RUNNING)
    tags.write(HEATER_ENABLE, False)


def operator_break(rt, phase):
    """Poll the mailbox once. Returns "STOP" when the batch must end, else None (after any HOLD)."""
    cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.2, maxMessages=1)
    if cmd is None:
        return None
    if cmd["cmd"] == "STOP":
        return "STOP"
    # HOLD: make the plant safe, then wait for the operator.
    if phase == "fill":
        tags.write_confirm(INLET_CMD, False, confirm_path=INLET_OPEN)
    rt.progress("held during %s: %s" % (phase, cmd.get("reason") or "no reason given"))
    while True:
        cmd = rt.recvCommand(currentState="HELD", timeoutSeconds=0.5, maxMessages=1)
        if cmd and cmd["cmd"] == "STOP":
            return "STOP"
        if cmd and cmd["cmd"] == "RESUME":
            break
    rt.setState("RUNNING")
    if phase == "fill":
        tags.write_confirm(INLET_CMD, True, confirm_path=INLET_OPEN)
    return None


def stopped(rt, summary):
    shut_down()
    rt.setState("STOPPED")
    summary["stopped"] = True
    return summary


@workflow(name="plant.batch")
def plant_batch(target_level=40.0, mix_speed=900, setpoint=35.0, mix_seconds=2.0, poll_ms=300):
    rt = getWorkflows()
    summary = {"stopped": False}
    rt.setState("STARTING")  # reports the state; a command sent now waits for the first poll

    rt.progress("filling to %s %%" % target_level)
    tags.write_confirm(INLET_CMD, True, confirm_path=INLET_OPEN)
    while True:
        if operator_break(rt, "fill") == "STOP":
            return stopped(rt, summary)
        level = tags.read(LEVEL)
        rt.progress("filling: level %.1f %% of %s %%" % (level["value"], target_level), {"level": level["value"]})
        if level["value"] >= target_level:
            break
        sleep_chunked(total_ms=poll_ms, chunk_ms=100)
    tags.write_confirm(INLET_CMD, False, confirm_path=INLET_OPEN)
    summary["level"] = round(tags.read(LEVEL)["value"], 1)

    rt.progress("mixing at %s rpm" % mix_speed)
    tags.write(MIXER_SPEED, mix_speed)
    tags.write_confirm(MIXER_CMD, True, confirm_path=MIXER_RUNNING)

    rt.progress("heating to %s degC" % setpoint)
    tags.write(HEATER_SETPOINT, setpoint)
    tags.write(HEATER_ENABLE, True)
    while True:
        if operator_break(rt, "heat") == "STOP":
            return stopped(rt, summary)
        temperature = tags.read(TEMPERATURE)["value"]
        rt.progress("heating: %.1f of %s degC" % (temperature, setpoint), {"temperature": temperature})
        if temperature >= setpoint - 0.5:
            break
        sleep_chunked(total_ms=poll_ms, chunk_ms=100)
    summary["temperature"] = round(tags.read(TEMPERATURE)["value"], 1)

    sleep_chunked(total_ms=mix_seconds * 1000, chunk_ms=100)
    shut_down()
    wait.until_tag_equals(MIXER_RUNNING, False, timeout_ms=10000)
    rt.setState("COMPLETE")
    rt.progress("batch complete")
    return summary

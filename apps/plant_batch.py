"""The demo batch on the simulated plant: fill the tank, mix, heat, with operator HOLD/RESUME/STOP.

Tag paths are the simulated plant's (``exchange simulate`` prints the matching config). Every write is
confirmed by its feedback tag; on HOLD the inlet valve is closed and the batch waits for RESUME, then
reopens it and carries on; on STOP everything is switched off and the batch ends cleanly.

A value is used only with Good quality. While a reading is Bad (a lost link, a failed sensor) the
batch reads again for up to ``link_wait_s``, still obeying the operator; then it switches off what
it can reach and fails with ``BadReading`` naming the tag and its quality.
"""

from exchange.errors import CommunicationError, ConfirmTimeout, StopRequested
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import control, tags, wait
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


class BadReading(Exception):
    """A tag the batch needs stayed unreadable (not Good quality) for longer than it may wait."""


def open_inlet():
    tags.write_confirm(INLET_CMD, True, confirm_path=INLET_OPEN)


def close_inlet():
    tags.write_confirm(INLET_CMD, False, confirm_path=INLET_OPEN)


def shut_down():
    """Everything off, each write confirmed. A device that cannot be reached (its writes fail after
    its comm_timeout_s) does not keep the others on: returns what could not be switched off."""
    failed = []
    for path, feedback in ((INLET_CMD, INLET_OPEN), (MIXER_CMD, MIXER_RUNNING), (HEATER_ENABLE, None)):
        try:
            if feedback is None:
                tags.write(path, False)
            else:
                tags.write_confirm(path, False, confirm_path=feedback)
        except (CommunicationError, ConfirmTimeout) as exc:
            failed.append("%s (%s)" % (path, exc))
    return failed


def read_good(rt, path, what, poll_ms, link_wait_s, on_hold=None, on_resume=None):
    """The value of ``path``, read with Good quality. A Bad reading is read again every ``poll_ms``
    for up to ``link_wait_s`` (the operator may still HOLD or STOP meanwhile); then BadReading."""
    for _ in range(max(1, int(link_wait_s * 1000 / poll_ms) + 1)):
        reading = tags.read(path)
        if reading["quality"] == "Good":
            return reading["value"]
        rt.progress("waiting for the %s: %s is %s" % (what, path, reading["quality"]))
        control.checkpoint(on_hold=on_hold, on_resume=on_resume)
        sleep_chunked(total_ms=poll_ms, chunk_ms=100)
    raise BadReading("%s %s unreadable for %s s: %s" % (what, path, link_wait_s, reading["quality"]))


def fill(rt, target_level, poll_ms, link_wait_s):
    rt.progress("filling to %s %%" % target_level)
    open_inlet()
    while True:
        control.checkpoint(on_hold=close_inlet, on_resume=open_inlet)
        level = read_good(rt, LEVEL, "tank level", poll_ms, link_wait_s, close_inlet, open_inlet)
        rt.progress("filling: level %.1f %% of %s %%" % (level, target_level), {"level": level})
        if level >= target_level:
            break
        sleep_chunked(total_ms=poll_ms, chunk_ms=100)
    close_inlet()
    return round(read_good(rt, LEVEL, "tank level", poll_ms, link_wait_s), 1)


def heat(rt, setpoint, poll_ms, link_wait_s):
    rt.progress("heating to %s degC" % setpoint)
    tags.write(HEATER_SETPOINT, setpoint)
    tags.write(HEATER_ENABLE, True)
    while True:
        control.checkpoint()
        temperature = read_good(rt, TEMPERATURE, "temperature", poll_ms, link_wait_s)
        rt.progress("heating: %.1f of %s degC" % (temperature, setpoint), {"temperature": temperature})
        if temperature >= setpoint - 0.5:
            break
        sleep_chunked(total_ms=poll_ms, chunk_ms=100)
    return round(read_good(rt, TEMPERATURE, "temperature", poll_ms, link_wait_s), 1)


@workflow(name="plant.batch")
def plant_batch(target_level=40.0, mix_speed=900, setpoint=35.0, mix_seconds=2.0, poll_ms=300, link_wait_s=10.0):
    rt = getWorkflows()
    summary = {"stopped": False}
    rt.setState("STARTING")  # reports the state; a command sent now waits for the first checkpoint
    try:
        summary["level"] = fill(rt, target_level, poll_ms, link_wait_s)
        rt.progress("mixing at %s rpm" % mix_speed)
        tags.write(MIXER_SPEED, mix_speed)
        tags.write_confirm(MIXER_CMD, True, confirm_path=MIXER_RUNNING)
        summary["temperature"] = heat(rt, setpoint, poll_ms, link_wait_s)
        sleep_chunked(total_ms=mix_seconds * 1000, chunk_ms=100)
    except StopRequested:
        shut_down()
        rt.setState("STOPPED")
        summary["stopped"] = True
        return summary
    except BadReading as exc:
        failed = shut_down()
        rt.setState("ABORTED")
        if failed:
            raise BadReading("%s; could not switch off: %s" % (exc, "; ".join(failed))) from exc
        raise
    shut_down()
    wait.until_tag_equals(MIXER_RUNNING, False, timeout_ms=10000)
    rt.setState("COMPLETE")
    rt.progress("batch complete")
    return summary

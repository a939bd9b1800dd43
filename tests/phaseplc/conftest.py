from tests.phaseplc.fixtures import phase_plc, phase_plc_modbus_server, phase_plc_opcua_server  # noqa: F401

"""The OPC UA server of runs: every HMI and SCADA that speaks OPC UA can show Exchange's runs and
send them HOLD, RESUME, STOP, ABORT or RESET, with no custom code (``[opcua_server] listen``)."""

"""Each protocol's device-under-test fixture, for the one contract suite (test_contract.py)."""

from tests.drivers.dut_enip import enip_dut  # noqa: F401
from tests.drivers.dut_modbus import modbus_dut  # noqa: F401
from tests.drivers.dut_opcua import opcua_dut  # noqa: F401

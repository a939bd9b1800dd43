"""The plant fixtures, as plant engineers get them from the ``exchange_plant`` pytest11 entry point.

Imported here too so these tests run whether or not the package (and its entry point) is installed;
a conftest fixture of the same name takes precedence over the plugin's, so nothing is started twice.
"""

from simulators.pytest_plugin import (  # noqa: F401
    fresh_sim_plant,
    plant_faults,
    sim_plant,
    sim_plant_params,
    sim_plant_protocols,
)

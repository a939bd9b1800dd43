"""Plant engineers' test settings: the simulated plant runs its physics faster than life."""

import pytest

from simulators.plant import PlantParams


@pytest.fixture(scope="session")
def sim_plant_params():
    return PlantParams(inflow_percent_per_second=20.0, heating_rate_c_per_second=8.0)

"""The data channels in the estimate: File mode's download is billed start-up, FastFile's is not."""

from __future__ import annotations

import pytest

import sm_dist
from sm_dist.catalog import get_instance
from sm_dist.estimator.cost import STARTUP_SECONDS, DataLoad, download_gbps, startup_seconds


def test_replicated_data_costs_every_instance_the_whole_download_sharded_its_share() -> None:
    p4d = get_instance("ml.p4d.24xlarge")
    rate = min(p4d.network_gbps, 100) * 0.5 * 1e9 / 8  # bytes per second
    data = DataLoad(replicated_bytes=100e9, sharded_bytes=400e9, streamed_bytes=1e12)
    assert download_gbps(p4d) == 50
    assert startup_seconds(p4d, 4, data) == pytest.approx(STARTUP_SECONDS + (100e9 + 400e9 / 4) / rate)
    assert startup_seconds(p4d, 1, DataLoad(streamed_bytes=1e12)) == STARTUP_SECONDS  # FastFile streams
    assert startup_seconds(p4d, 8, None) == STARTUP_SECONDS


def test_the_estimate_bills_the_download_and_says_what_it_assumed() -> None:
    data = DataLoad(replicated_bytes=50e9, unknown=("val",))
    with_data = sm_dist.estimate(model="gpt2", tokens=1e9, instance_types=["ml.g5.12xlarge"], instance_counts=[2],
                                 strategies=["ddp"], data=data)
    without = sm_dist.estimate(model="gpt2", tokens=1e9, instance_types=["ml.g5.12xlarge"], instance_counts=[2],
                               strategies=["ddp"])
    g5 = get_instance("ml.g5.12xlarge")
    extra_hours = 50e9 * 8 / (download_gbps(g5) * 1e9) / 3600
    # a restart after a failure downloads the data again: a hair more than one download
    assert with_data.rows[0].hours - without.rows[0].hours == pytest.approx(extra_hours, rel=1e-3)
    assert with_data.rows[0].hours - without.rows[0].hours > extra_hours
    line = next(line for line in with_data.table().splitlines() if "start-up billed" in line)
    assert "50.0 GB replicated" in line and "size unknown, not counted: val" in line
    assert with_data.to_dict()["assumptions"]["data"]["download_gbps"] == {"ml.g5.12xlarge": download_gbps(g5)}

"""What the simhost trace-replay end-to-end tests share: the shipped Mooncake fixture less the
prefix trees simhost's model cannot take and its down-sampled replay (gates.demo.trace, which
the demo uploads and replays too), its upload through the service the pages and the API use,
and a simhost reached over a real sshd."""

from __future__ import annotations

import pytest

from gates import services
from gates.demo.trace import KV_PLAN, REPLAY_HOST_TIME_SCALE, fitting_trace, trace_workload
from gates.models import Engagement, WorkloadTrace
from gates.tenancy import viewer_for_user
from tests.simhosts import ssh_simhost

__all__ = ["KV_PLAN", "sim_host", "trace_workload", "upload_trace"]


@pytest.fixture
def sim_host(customer_org, own_sshd, tmp_path):
    return ssh_simhost(customer_org, own_sshd, tmp_path / "host", time_scale=REPLAY_HOST_TIME_SCALE)


def upload_trace(actor: services.Actor, engagement: Engagement) -> WorkloadTrace:
    return services.trace_upload(
        actor=actor,
        viewer=viewer_for_user(actor.user),
        engagement=engagement,
        name="mooncake.jsonl",
        content=fitting_trace(),
        trace_format="mooncake",
    )

from __future__ import annotations

import pytest

from gates import services
from gates.evidence import publication as publishing
from gates.tenancy import viewer_for_user
from tests.gates.evidence.conftest import api  # noqa: F401 (the evidence tests' token client)
from tests.gates.evidence.helpers import g3_upload_decision


@pytest.fixture
def g3_decision(api, actor, vendor_viewer, engagement, host):  # noqa: F811
    return g3_upload_decision(api, actor, vendor_viewer, engagement, host)


@pytest.fixture
def owner_viewer(customer_owner):
    return viewer_for_user(customer_owner)


@pytest.fixture
def owner_actor(customer_owner):
    return services.Actor(user=customer_owner, label="test")


@pytest.fixture
def proposed(actor, vendor_viewer, g3_decision):
    return publishing.publication_propose(actor=actor, viewer=vendor_viewer, decision=g3_decision)


@pytest.fixture
def published(owner_actor, owner_viewer, proposed):
    return publishing.publication_approve(
        actor=owner_actor,
        viewer=owner_viewer,
        publication=proposed,
        naming="industry",
        industry_label="a cloud provider",
        host_details=["gpu_models", "gpu_count"],
    )

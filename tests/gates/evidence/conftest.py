from __future__ import annotations

import pytest

from tests.gates.test_tenancy import token_client


@pytest.fixture
def api(vendor_admin, vendor_org):
    return token_client(vendor_admin, vendor_org, scopes=["read", "run"])

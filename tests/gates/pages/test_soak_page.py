"""The soak page (templates/gates/_soak.html on the run page) and its range route: the chart
and its numbers from the stored windows, bounded points, zoom at full resolution, live
updates picked up from the cache plus what was stored since, and errors naming the field."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import numpy as np
import pytest
from django.core.cache import cache
from django.db.models import Case, FloatField, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.urls import reverse

from gates import services
from gates.charts import g4
from gates.models import Gate, Run, Soak, SoakSample
from gates.pages.soak import columns as soakcolumns
from gates.specs import validation as specs

pytestmark = pytest.mark.django_db
T0 = 1.8e9
WINDOW_S = 10.0


def metrics(seq: int, **extra) -> dict:
    return {
        "crashed": False,
        "completed": 100,
        "failed": 0,
        "output_throughput": 500.0 + seq % 7,
        "ttft_p50_ms": 800.0,
        "ttft_p99_ms": 2000.0,
        "kv_cache_usage": 0.5,
        "external_hit_rate": 0.95,
        "memory_bytes": 40 * 2**30,
        "host_available_bytes": 400 * 2**30,
        "gpu_memory_used_mib": 70 * 1024,
        **extra,
    }


def store(run: Run, seqs, **extra) -> None:
    when = lambda s: datetime.fromtimestamp(s, tz=UTC)  # noqa: E731
    SoakSample.objects.bulk_create(
        SoakSample.of_window(
            run=run,
            seq=seq,
            window_start=when(T0 + seq * WINDOW_S),
            window_end=when(T0 + (seq + 1) * WINDOW_S),
            metrics=metrics(seq, **extra),
        )
        for seq in seqs
    )
    Soak.objects.filter(run=run).update(last_seq=max(seqs))


@pytest.fixture
def soak_run(actor, engagement) -> Run:
    gate = engagement.gates.get(kind="G4")
    document = specs.default_spec("G4")
    services.gate_spec_update(actor=actor, gate=gate, document=document)
    gate.refresh_from_db()
    run = Run.objects.create(gate=gate, spec=gate.current_spec, attempt=1, state=Run.State.RUNNING)
    Soak.objects.create(
        run=run, run_dir="/tmp/x", agent_sha256="0" * 64, started=T0, deadline=T0 + 72 * 3600
    )
    return run


def page_figure(client, run: Run) -> tuple[dict, str]:
    page = client.get(reverse("gates:run-detail", args=[run.pk])).content.decode()
    start = page.index('<script id="soak-figure" type="application/json">')
    text = page[start:].split(">", 1)[1].split("</script>", 1)[0]
    return json.loads(text), page


def lines(figure: dict) -> dict[str, dict]:
    return {trace["name"]: trace for trace in figure["data"]}


def test_a_long_soak_page_draws_bounded_points_with_its_numbers_in_a_table(
    client, vendor_admin, soak_run
):
    store(soak_run, range(3000))
    store(soak_run, [3000], crashed=True, output_throughput=1.0)
    client.force_login(vendor_admin)
    figure, page = page_figure(client, soak_run)
    throughput = lines(figure)["output throughput"]
    assert len(throughput["x"]) <= g4.PAGE_POINTS
    assert min(throughput["y"]) == 1.0  # the crashed window's dip is kept
    crash_at = round(3000 * WINDOW_S / 3600, g4.HOUR_DECIMALS)
    assert any(s["type"] == "line" and s["x0"] == crash_at for s in figure["layout"]["shapes"])
    assert "3001 windows stored" in page and "Numbers per series" in page
    assert '<th scope="row">output throughput</th><td>tokens/s</td><td>3001</td>' in page
    assert "vendor/plotly.min.js" in page and "cdn" not in page.lower()


def test_zooming_draws_the_range_at_full_resolution_and_bad_ranges_name_the_field(
    client, customer_viewer, soak_run
):
    store(soak_run, range(3000))
    client.force_login(customer_viewer)
    url = reverse("gates:soak-series", args=[soak_run.pk])
    whole = client.get(url).json()
    assert whole["windows"] == 3000 and whole["shown"] == 3000
    assert len(lines(whole["figure"])["output throughput"]["x"]) <= g4.PAGE_POINTS
    # Hours 1 to 2 of the soak: windows 360..720, every one of them drawn.
    zoomed = client.get(url, {"from_h": 1, "to_h": 2}).json()
    assert zoomed["shown"] == 361
    assert len(lines(zoomed["figure"])["output throughput"]["x"]) == 361
    assert zoomed["figure"]["layout"]["xaxis"]["range"] == [1.0, 2.0]
    bad = client.get(url, {"from_h": "soon"})
    assert bad.status_code == 400 and bad.json()["field"] == "from_h"
    backwards = client.get(url, {"from_h": 2, "to_h": 1})
    assert backwards.status_code == 400 and backwards.json()["field"] == "to_h"


def test_a_live_soak_shows_new_windows_with_only_those_read_again(client, vendor_admin, soak_run):
    store(soak_run, range(100))
    client.force_login(vendor_admin)
    url = reverse("gates:soak-series", args=[soak_run.pk])
    assert client.get(url).json()["windows"] == 100
    store(soak_run, range(100, 130), output_throughput=9999.0)
    read = []
    original = soakcolumns._read

    def counted(samples):
        table = original(samples)
        read.append(len(table))
        return table

    soakcolumns._read, body = counted, None
    try:
        body = client.get(url).json()
    finally:
        soakcolumns._read = original
    assert body["windows"] == 130 and body["live"] is True
    assert read == [30]  # the cached 100 were not read again
    assert max(lines(body["figure"])["output throughput"]["y"]) == 9999.0


def test_without_a_cache_the_page_reads_every_window_and_still_draws(
    client, vendor_admin, soak_run, monkeypatch
):
    store(soak_run, range(50))

    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(cache, "get", down)
    monkeypatch.setattr(cache, "set", down)
    client.force_login(vendor_admin)
    figure, _ = page_figure(client, soak_run)
    assert len(lines(figure)["output throughput"]["x"]) == 50


def test_a_run_that_is_not_a_soak_has_no_series(client, vendor_admin, soak_run):
    Soak.objects.filter(run=soak_run).delete()
    client.force_login(vendor_admin)
    assert client.get(reverse("gates:soak-series", args=[soak_run.pk])).status_code == 404
    page = client.get(reverse("gates:run-detail", args=[soak_run.pk])).content.decode()
    assert "soak-figure" not in page


def read_from_json(samples) -> np.ndarray:
    """The table as the page read it before the columns: cast from each row's JSON."""
    numbers = {
        f"n_{name}": Cast(KeyTextTransform(name, "metrics"), FloatField())
        for name in soakcolumns.NUMBERS
    }
    crashed = Case(
        When(metrics__crashed=True, then=Value(1.0)), default=Value(0.0), output_field=FloatField()
    )
    rows = (
        samples.annotate(epoch=soakcolumns.Epoch("window_start"), n_crashed=crashed, **numbers)
        .order_by("seq")
        .values_list("seq", "epoch", "n_crashed", *numbers)
    )
    return np.array(list(rows), dtype=float).reshape(len(rows), len(soakcolumns.COLUMNS))


def test_the_page_reads_from_the_columns_what_it_read_from_the_json(
    client, vendor_admin, soak_run, monkeypatch
):
    store(soak_run, range(1500))
    store(soak_run, [1500], crashed=True, completed=None, failed=None, output_throughput=None)
    store(soak_run, [1501], kv_cache_usage=None, gpu_memory_used_mib=None, failed=4)
    when = lambda s: datetime.fromtimestamp(s, tz=UTC)  # noqa: E731
    lacking = {"crashed": False, "output_throughput": 480.0}  # a window missing most keys
    SoakSample.of_window(
        run=soak_run,
        seq=1502,
        window_start=when(T0 + 1502 * WINDOW_S),
        window_end=when(T0 + 1503 * WINDOW_S),
        metrics=lacking,
    ).save()
    Soak.objects.filter(run=soak_run).update(last_seq=1502)
    samples = SoakSample.objects.filter(run=soak_run)
    table = soakcolumns._read(samples)
    np.testing.assert_array_equal(table, read_from_json(samples))  # NaN where NULL, in both
    rows = samples.annotate(epoch=soakcolumns.Epoch("window_start")).order_by("seq")
    rows = rows.values_list("seq", "epoch", *soakcolumns.COLUMNS[2:])
    np.testing.assert_array_equal(soakcolumns._read_rows(rows), table)  # SQLite's way
    assert soakcolumns._read(samples.filter(seq__gt=1502)).shape == (0, len(soakcolumns.COLUMNS))
    assert np.isnan(soakcolumns.column(table, "output_throughput")).sum() == 1
    assert soakcolumns.column(table, "crashed").tolist().count(1.0) == 1
    client.force_login(vendor_admin)
    series = reverse("gates:soak-series", args=[soak_run.pk])
    from_columns = unsigned(page_figure(client, soak_run)), client.get(series).json()
    cache.clear()
    monkeypatch.setattr(soakcolumns, "_read", read_from_json)
    assert (unsigned(page_figure(client, soak_run)), client.get(series).json()) == from_columns


def unsigned(figure_and_page: tuple[dict, str]) -> tuple[dict, str]:
    """The page without its CSRF tokens (a new one each response)."""
    figure, page = figure_and_page
    return figure, re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", page)


def test_a_soak_that_ended_without_a_decision_never_says_it_is_still_running(
    client, vendor_admin, soak_run
):
    store(soak_run, range(3))
    provisional = {"verdict": "pass", "reasons": [], "clauses": [], "computed_at": T0 + 30}
    Soak.objects.filter(run=soak_run).update(provisional=provisional)
    client.force_login(vendor_admin)
    url = reverse("gates:run-detail", args=[soak_run.pk])
    running = client.get(url).content.decode()
    assert "Provisional verdict (the soak is still running)" in running
    # An agent that lost its disk ends the soak infra_error: no decision, the last look kept.
    Soak.objects.filter(run=soak_run).update(state=Soak.State.ENDED)
    services.run_fail(run_id=soak_run.pk, outcome="infra_error", reason="the disk filled")
    ended = client.get(url).content.decode()
    assert "still running" not in ended
    assert "Last provisional verdict before the soak ended (it decides nothing" in ended


def test_a_compressed_soak_is_labelled_so_wherever_its_verdict_is_shown(
    client, customer_viewer, soak_run
):
    from gates.selectors import gate_readout
    from gates.services.soak.verdict import soak_decide as _decide

    store(soak_run, range(6))
    Soak.objects.filter(run=soak_run).update(compressed=True)
    Gate.objects.filter(pk=soak_run.gate_id).update(state=Gate.State.RUNNING)  # G1-G3 cleared
    soak = Soak.objects.get(run=soak_run)
    decision = services.decision_record(run_id=soak_run.pk, result=_decide(soak))
    gate = soak_run.gate
    client.force_login(customer_viewer)
    gate_page = client.get(reverse("gates:gate-detail", args=[gate.pk])).content.decode()
    verdict = decision.verdict.replace("_", " ")
    assert f'>{verdict}</span> <span class="badge qualifier-compressed">compressed soak<' in (
        gate_page
    )
    engagement = reverse("gates:engagement-detail", args=[gate.engagement_id])
    assert "qualifier-compressed" in client.get(engagement).content.decode()
    listing = client.get(reverse("gates:engagement-list")).content.decode()
    assert f'data-label="{verdict} · compressed"' in listing
    # The API's gate read (GET /api/v1/gates/<pk>/) serves this stored readout.
    assert gate_readout(gate.pk)["latest_decision"]["compressed"] is True
    report = client.get(reverse("gates:gate-report", args=[gate.pk])).content.decode()
    assert 'class="badge qualifier-compressed soak">compressed soak<' in report

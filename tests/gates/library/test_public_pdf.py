"""A published report's public PDF is rendered once (queued at approval, or by the first reader)
and then served as stored: an anonymous URL never makes the server render the same report twice."""

from __future__ import annotations

import hashlib
import threading

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from gates.evidence import publication as publishing
from gates.models import Publication
from gates.pages.library import public
from gates.services import pokes
from worker.tasks import render_library_pdf


@pytest.fixture
def renders(monkeypatch):
    """Every render of a publication's PDF, by publication id (the real renderer runs)."""
    done: list[int] = []
    real = public.render_publication_pdf

    def counted(publication):
        done.append(publication.pk)
        return real(publication)

    monkeypatch.setattr(public, "render_publication_pdf", counted)
    return done


def _pdf_url(publication: Publication) -> str:
    return reverse("gates:library-pdf", args=[publication.slug])


@pytest.mark.django_db
def test_approval_queues_the_pdf_and_the_worker_stores_it_for_every_reader(
    owner_actor, owner_viewer, proposed, renders, monkeypatch, django_capture_on_commit_callbacks
):
    sent: list[tuple[str, tuple[int, ...]]] = []
    monkeypatch.setattr(pokes, "send", lambda name, *args: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        publishing.publication_approve(
            actor=owner_actor,
            viewer=owner_viewer,
            publication=proposed,
            naming="industry",
            industry_label="a cloud provider",
            host_details=["gpu_models"],
        )
    assert (pokes.RENDER_LIBRARY_PDF, (proposed.pk,)) in sent

    render_library_pdf(proposed.pk)  # the task, as the worker runs it
    render_library_pdf(proposed.pk)  # a redelivered poke
    stored = Publication.objects.get(pk=proposed.pk)
    assert renders == [proposed.pk]
    assert bytes(stored.pdf).startswith(b"%PDF-")
    assert stored.pdf_sha256 == hashlib.sha256(bytes(stored.pdf)).hexdigest()

    reader = Client()
    response = reader.get(_pdf_url(proposed))
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response.content == bytes(stored.pdf)
    assert response["ETag"] == f'"{stored.pdf_sha256}"'
    again = reader.get(_pdf_url(proposed), HTTP_IF_NONE_MATCH=response["ETag"])
    assert again.status_code == 304 and again.content == b""
    assert renders == [proposed.pk]  # readers never rendered it


@pytest.mark.django_db
def test_a_lost_poke_leaves_it_to_the_first_reader_and_a_withdrawal_still_hides_it(
    published, owner_actor, owner_viewer, renders
):
    reader = Client()
    first = reader.get(_pdf_url(published))
    second = reader.get(_pdf_url(published))
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and first.content.startswith(b"%PDF-")
    assert renders == [published.pk]
    publishing.publication_withdraw(
        actor=owner_actor, viewer=owner_viewer, publication=published, reason="no longer"
    )
    assert reader.get(_pdf_url(published)).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_two_first_readers_at_once_share_one_render(published, renders, monkeypatch):
    """The second reader waits on the row lock of the first and reads its bytes."""
    started = threading.Event()
    release = threading.Event()
    counted = public.render_publication_pdf  # the `renders` spy around the real renderer

    def slow(publication):
        started.set()
        assert release.wait(30), "the test never released the first render"
        return counted(publication)

    monkeypatch.setattr(public, "render_publication_pdf", slow)
    results: dict[str, bytes] = {}

    def read(name: str) -> None:
        try:
            results[name] = public.publication_pdf(published.pk)[0]
        finally:
            connection.close()

    first = threading.Thread(target=read, args=("first",))
    first.start()
    assert started.wait(30), "the first reader never began rendering"
    monkeypatch.setattr(public, "render_publication_pdf", _never_called)
    second = threading.Thread(target=read, args=("second",))
    second.start()
    release.set()
    first.join(60)
    second.join(60)
    assert results["first"] == results["second"] and results["first"].startswith(b"%PDF-")
    assert renders == [published.pk]


def _never_called(publication):
    raise AssertionError("a second reader rendered the PDF again")

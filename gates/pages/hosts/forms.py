"""The hosts page's forms. Lease, fencing token and key material are never fields: the lease
belongs to the runs, the key is pinned from a scan, a private key is write-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput

from gates.models import Host, Organization, Profile
from runners import jsonlimits

PORT_ERRORS = {
    "min_value": "a TCP port from 1 to 65535",
    "max_value": "a TCP port from 1 to 65535",
    "invalid": "a TCP port from 1 to 65535",
    "required": "a TCP port from 1 to 65535",
}


class SecretTextarea(forms.Textarea):
    """A textarea that never renders a value back: a pasted private key leaves the browser
    once and never comes back in a page, not even on a form with errors."""

    def format_value(self, value):
        return None


def port_field() -> forms.IntegerField:
    return forms.IntegerField(min_value=1, max_value=65535, initial=22, error_messages=PORT_ERRORS)


class ScanForm(forms.Form):
    """Step 1: where the host is. Scanning reads its key; nothing is stored yet."""

    organization = forms.ModelChoiceField(
        queryset=Organization.objects.filter(kind=Organization.Kind.CUSTOMER),
        help_text="The customer that owns the host.",
    )
    name = forms.SlugField(max_length=80, help_text="Letters, digits and dashes, e.g. gpu-01.")
    address = forms.CharField(max_length=255, help_text="Host name or IP address.")
    port = port_field()


class CredentialFields(forms.Form):
    """How Tollgate logs in: a user, and a private key (stored encrypted) or a key file path."""

    username = forms.CharField(max_length=64)
    private_key = forms.CharField(
        required=False,
        strip=False,
        widget=SecretTextarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        help_text="PEM or OpenSSH private key; stored encrypted, never shown again.",
    )
    key_file_path = forms.CharField(
        max_length=500,
        required=False,
        help_text="Or an absolute path to a key file on the worker machines.",
    )
    profile = forms.ModelChoiceField(queryset=Profile.objects.all(), to_field_name="name")


class RegisterForm(CredentialFields):
    """Step 2: the scanned fingerprint confirmed with the host's owner, and the login."""

    fingerprint = forms.CharField(widget=forms.HiddenInput)
    confirmed = forms.BooleanField(
        label="I confirmed this fingerprint with the host's owner (out of band)",
        error_messages={"required": "confirm the fingerprint with the host's owner first"},
    )


class StorableJSONField(forms.JSONField):
    """JSON read within runners.jsonlimits: escapes spelling U+0000 or a lone surrogate (which
    PostgreSQL cannot store) are a form error naming where, and the text is shown back as
    typed (re-serialized, a lone surrogate could not even be encoded into the page)."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip() and not self.disabled:
            try:
                jsonlimits.check_storable(super().to_python(value))
            except jsonlimits.JsonLimitError as error:
                raise forms.ValidationError(str(error), code="unstorable") from error
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        found = super().bound_data(data, initial)
        if jsonlimits.storable_problems(found):
            return InvalidJSONInput(data)
        return found


class HostEditForm(CredentialFields):
    name = forms.SlugField(max_length=80)
    address = forms.CharField(max_length=255)
    port = port_field()
    parameters = StorableJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text='Template values for this host, e.g. {"run_root": "/srv/tollgate"}.',
    )

    field_order = ["name", "address", "port", "username", "profile", "key_file_path"]

    def clean_parameters(self) -> dict:
        value = self.cleaned_data.get("parameters")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError('a JSON object, e.g. {"run_root": "/srv/tollgate"}')
        return value

    @classmethod
    def for_host(cls, host: Host, data=None) -> HostEditForm:
        initial = {
            "name": host.name,
            "address": host.address,
            "port": host.port,
            "username": host.username,
            "profile": host.profile.name,
            "key_file_path": host.key_file_path,
            "parameters": host.parameters,
        }
        return cls(data, initial=initial)


class PinForm(forms.Form):
    """Pinning a re-scanned key: the fingerprint shown, confirmed with the host's owner."""

    fingerprint = forms.CharField(widget=forms.HiddenInput)
    confirmed = forms.BooleanField(
        label="I confirmed this new fingerprint with the host's owner (out of band)",
        error_messages={"required": "confirm the new fingerprint with the host's owner first"},
    )

"""`{% can "host.manage" as flag %}`: what the signed-in viewer may do, for navigation links.
Reads the request's cached Viewer (tenancy.viewer_for_request), so a page that already looked
it up pays no query."""

from __future__ import annotations

from django import template

from gates.tenancy import viewer_for_request

register = template.Library()


@register.simple_tag(takes_context=True)
def can(context, action: str) -> bool:
    request = context.get("request")
    return request is not None and viewer_for_request(request).can(action)
